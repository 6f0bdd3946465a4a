// State backends by name. Each backend (src/state/<name>/) describes itself as one Backend entry:
// how the router builds its StateStore (read side) and how an agent builds its NodePublisher
// (write side). cgn-router and cgn-agent look the entry up by the config's `state_backend`, so
// neither names a backend type; an unknown name is a config error that lists the registered
// ones. src/state/backends.h assembles the built-in registry.
//
// Thread-safety: a registry is filled once at start-up and read-only afterwards.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/kv_publish_set.h"
#include "cluster/node_record.h"
#include "cluster/state_store.h"
#include "core/config.h"
#include "core/digest_types.h"
#include "core/metrics.h"
#include "core/result.h"

namespace cgn::cluster {

// The agent's side of a backend: makes the node's record (and, where the backend carries them, its
// live KV prefixes) known to the routers.
class NodePublisher {
 public:
  virtual ~NodePublisher() = default;
  // Begins publishing (a thread of the publisher's own, where it needs one).
  virtual Status<StateError> start() = 0;
  // Stops publishing and leaves the cluster at once where the backend can. Idempotent.
  virtual void stop() = 0;
  // False when the backend cannot carry live KV prefixes (static, gossip): the caller then
  // records none.
  virtual bool carries_prefixes() const = 0;
  // Live KV prefixes of the node's engine, as they are seen (no-op where !carries_prefixes()).
  virtual void record_prefixes(std::span<const Digest> /*chain*/) {}
  // The engine's KV events asked to withdraw prefixes (no-op where !carries_prefixes()). Any
  // thread.
  virtual void withdraw(const KvWithdrawal& /*w*/) {}
  // False where the backend cannot carry the node's cgn-kvcached residency (static, gossip: a
  // record must fit a datagram); the agent then looks nothing up for publishing.
  virtual bool carries_tiers() const { return false; }
  // Digests the node's cgn-kvcached holds (`resident`, with their tier) or no longer holds
  // (`gone`), published beside the engine's prefixes (no-op where !carries_tiers()). Any thread.
  virtual void record_residency(std::span<const std::pair<Digest, routing::Tier>> /*resident*/,
                                std::span<const Digest> /*gone*/) {}
  // What withdraw() did so far (zeros where !carries_prefixes()). Any thread.
  virtual WithdrawalStats withdrawal_stats() const { return {}; }
  // Exports the publisher's counters into `registry` (the agent's /metrics); it must outlive the
  // publisher.
  virtual void attach_metrics(metrics::Registry& /*registry*/) {}
  // What the agent logs once at start: how its record reaches the routers.
  virtual std::string describe() const = 0;
  // The backend's registered name.
  virtual std::string_view backend() const = 0;
};

// What the router hands a backend to build its store.
struct StoreParams {
  const config::CognitoraConfig& config;
  // The router's poll period for polled backends ([router.timeouts] health_interval_ms or
  // --poll-interval-ms).
  std::chrono::milliseconds poll_interval;
};

// What the agent hands a backend to build its publisher.
struct PublisherParams {
  const config::CognitoraConfig& config;
  std::string node_id;
  // The current record (thread-safe; the publisher calls it from its own thread).
  std::function<NodeRecord()> record;
};

struct Backend {
  std::string name;  // the `state_backend` value
  std::function<Result<std::unique_ptr<StateStore>, StateError>(const StoreParams&)> make_store;
  std::function<Result<std::unique_ptr<NodePublisher>, StateError>(const PublisherParams&)> make_publisher;
};

class BackendRegistry {
 public:
  // Adds a backend; one without a name, make_store or make_publisher, or a second one of the same
  // name, is a programming error (kConfig).
  Status<StateError> add(Backend backend);
  // The entry for `name`, or kConfig naming `name` and the registered backends.
  Result<const Backend*, StateError> find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<Backend> backends_;
};

}  // namespace cgn::cluster
