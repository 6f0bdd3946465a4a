// cgn-agent as one application object (docs/design/lifecycle.md): parsed options in (AgentSetup,
// agent/agent_options.h), start() / stop(deadline) out; main only adds the shutdown signals.
//
// What start() runs, in this order (the members are declared in it): with [[power.sources]] an
// in-process power reader (power/reader.h) whose figures the record carries, the NodeAgent (engine
// supervisor + scrape loop, agent/node_agent.h), the gRPC service Agent (Health), the state
// backend's publisher of the node record (found by `state_backend` in src/state/backends.h), the
// engine's KV event subscriber ([engine] kv_events), with kv_offload = "cgn" the residency
// lookups in the node's cgn-kvcached (agent/kv_residency.h), and the HTTP data path in front of the engine
// (AgentProxy). stop() stops them in reverse: the proxy drains for the grace left until the
// deadline, the KV event subscriber stops, the publisher leaves the cluster at once (etcd: revokes
// the lease), the gRPC service stops, then the engine stops (its own stop_grace_ms).
//
// Threads: every thread belongs to one of those components and is joined by stop(). The object is
// driven from one thread (main, or a test).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "agent/agent_options.h"
#include "core/cli_exit.h"
#include "core/clock.h"
#include "core/cluster_token.h"
#include "core/digest_types.h"

namespace cgn::cluster {
class NodePublisher;
}
namespace cgn::kvcached {
class KvClient;
}
namespace cgn::power {
class Reader;
}

namespace cgn::agent {

class AgentGrpcServer;
class AgentProxy;
class KvEventSubscriber;
class KvResidency;
class NodeAgent;

// --print-command / --print-record: configures logging, resolves the driver and, for the record,
// probes the GPU; returns status 0 with the text to print (stdout), or status 2 with the reason.
// nullopt when neither flag is set (the agent runs).
std::optional<Error<int>> agent_print_mode(const AgentSetup& setup);

class AgentApp {
 public:
  // `clock` is the one stop() reads to turn its deadline into grace periods.
  explicit AgentApp(AgentSetup setup, const Clock& clock = SteadyClock::instance());
  ~AgentApp();  // stop(now): no grace
  AgentApp(const AgentApp&) = delete;
  AgentApp& operator=(const AgentApp&) = delete;

  // Configures logging and starts everything above; returns once the data path serves and the
  // record is published. On failure: status 2 and a message naming the cause (the key or address
  // at fault); nothing is left running. Call once.
  CliResult<Ok> start();
  // Stops in the order above; in-flight requests may finish until `deadline` (clock time).
  // Idempotent; a no-op before start().
  void stop(Nanos deadline);

  // SIGHUP: reads --config again and applies [agent] watt_limit (the record carries it at once);
  // other keys need a restart. On a config error the old limit stays and the error is logged.
  CliResult<Ok> reload();

  // clock now + [router.timeouts] shutdown_grace_ms: the deadline main gives stop().
  Nanos shutdown_deadline() const;
  // The bound ports (0 before start(); gRPC 0 when the default address could not be bound).
  uint16_t port() const;
  uint16_t grpc_port() const;

 private:
  CliResult<Ok> start_power();
  CliResult<Ok> start_grpc();
  CliResult<Ok> make_publisher();
  CliResult<Ok> start_kv_events();
  CliResult<Ok> start_residency();
  CliResult<Ok> start_proxy(const std::string& host, uint16_t port);

  AgentSetup setup_;
  const Clock& clock_;
  const auth::ClusterToken cluster_token_;
  const EngineDriver* driver_ = nullptr;
  bool started_ = false;
  bool stopped_ = false;
  // Declared in start order; stop() stops them in reverse.
  std::unique_ptr<power::Reader> power_;  // [[power.sources]] configured only
  std::unique_ptr<NodeAgent> node_;
  std::unique_ptr<AgentGrpcServer> grpc_;
  std::unique_ptr<cluster::NodePublisher> publisher_;
  std::unique_ptr<KvEventSubscriber> kv_events_;
  std::unique_ptr<kvcached::KvClient> kvcached_;  // kv_offload = "cgn" only
  std::unique_ptr<KvResidency> residency_;        // kv_offload = "cgn" only
  std::function<std::vector<Digest>(std::string_view, std::string_view)> engine_chain_;  // with residency_
  std::unique_ptr<AgentProxy> proxy_;
};

}  // namespace cgn::agent
