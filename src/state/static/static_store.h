// StaticStore: the "static" state backend. The nodes come from configuration ([[router.nodes]]
// or --node flags), are bare OpenAI-compatible engines (or agents), and are polled on a fixed
// period: GET <base>/health decides health (200 = healthy; anything else, or no answer within
// the poll timeout, = unhealthy), GET <base>/metrics is mapped through the routing core's
// scraper (routing/engine_metrics.h) into load and KV use, and GET <base>/v1/models supplies the
// model list of a node configured without one. A node failing health is reported unhealthy, so
// it leaves routing, and comes back with the first successful poll.
//
// Threads: one thread of its own running one io_context with one HttpClient; every node has a
// poll loop (a coroutine) on it, so a stalled node never delays another. The sink is called
// from that thread. stop() cancels the loops and joins the thread.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/agent_health.h"
#include "cluster/state_store.h"

namespace cgn::http {
class HttpClient;
}

namespace cgn::state {

class AgentHealthClients;

struct StaticNodeSpec {
  std::string name;  // unique; empty = the URL's host:port
  std::string url;   // http(s)://host:port[/base]
  routing::NodeRole role = routing::NodeRole::kBoth;
  std::vector<std::string> models;  // empty = learned from GET /v1/models
  // Which /metrics mapping to apply (routing::parse_engine_kind); "mlx" and "cgn-infer" have
  // none: their health and models are polled, their load is not scraped.
  std::string engine = "vllm";
  // "host:port" of the node's cgn-agent gRPC service. Set: the node is an agent, polled through
  // Agent.Health for its node record (health, load, pool, kv_epoch, role, models) instead of
  // /health, /metrics and /v1/models; requests still go to `url` (the agent's HTTP endpoint).
  std::string agent;
};

struct StaticStoreOptions {
  std::vector<StaticNodeSpec> nodes;
  std::chrono::milliseconds interval{1000};      // poll period per node
  std::chrono::milliseconds poll_timeout{1000};  // connect + answer, per probe
  size_t max_models_per_node = 256;
  cluster::GrpcSecurity security;  // how agents' Agent.Health is called (cluster token, [tls])
};

// The default node name for a URL: its host:port ("127.0.0.1:8001").
std::string default_node_name(const cluster::NodeEndpoint& endpoint);

class StaticStore final : public cluster::StateStore {
 public:
  // Validates the node list (URLs, unique names, known engines).
  static Result<std::unique_ptr<StaticStore>, cluster::StateError> create(StaticStoreOptions options);
  ~StaticStore() override;

  Status<cluster::StateError> start(cluster::NodeSink sink) override;
  void stop() override;
  std::string_view backend() const override { return "static"; }

  // Completed poll rounds over all nodes (tests wait on it).
  uint64_t polls_completed() const { return polls_.load(std::memory_order_relaxed); }

  struct Node;

 private:
  explicit StaticStore(StaticStoreOptions options, std::vector<Node> nodes);
  // One node's poll loop (a member function, not a lambda: the coroutine must not outlive
  // a closure object).
  boost::asio::awaitable<void> poll_loop(size_t i);
  // The same for a node with an agent address: Agent.Health instead of the HTTP probes.
  boost::asio::awaitable<void> agent_poll_loop(size_t i);
  // Both loops' tail: delivers `ev`, counts the poll and sleeps one interval on `timer`. False
  // when the sleep was cancelled (the store stops).
  boost::asio::awaitable<bool> deliver_then_sleep(const cluster::NodeEvent& ev,
                                                  boost::asio::steady_timer& timer);

  StaticStoreOptions options_;
  std::vector<Node> nodes_;
  cluster::NodeSink sink_;
  std::unique_ptr<boost::asio::io_context> ctx_;
  std::unique_ptr<http::HttpClient> client_;
  std::unique_ptr<AgentHealthClients> agents_;  // gRPC channels of the agent nodes
  std::vector<std::unique_ptr<boost::asio::cancellation_signal>> signals_;
  std::thread thread_;
  std::atomic<uint64_t> polls_{0};
  bool started_ = false;
};

}  // namespace cgn::state
