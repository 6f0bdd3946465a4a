// Gateway: the cgn-router application object. It owns the HTTP server (OpenAI API, /health,
// /metrics, /dashboard/), one upstream HttpClient per server worker, the NodeTable (routing core
// and node endpoints), admission counters, the metrics probe and the StateStore that feeds node
// state. main.cpp only parses flags and configuration, builds a Gateway, and waits for signals.
//
// Request flow (docs/architecture/router.md has the full trace), one unit per stage:
//   intake.h          auth from the headers alone (before the body is read)
//   request_intake.h  client headers, body parse, model, prefix digests, admission
//   request_plan.h    the steps: AggregatedPlan (one relayed step) or PdPlan (disagg.h: prefill
//                     buffered, then decode relayed)
//   dispatcher.h      one step: ranked attempts, failover before the first byte, relay, cancel
//   node_table.h      decisions and in-flight tickets (the routing core, one short lock each)
//
// Threads: the server's N workers run handlers; the store's thread delivers node events; one
// maintenance thread refreshes the cluster mirror every mirror_interval. Only NodeTable touches
// the routing core (node_table.h says which lock each call takes). start()/stop()/reload() are
// for the owning thread (main); everything else is safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/agent_health.h"
#include "cluster/state_store.h"
#include "core/clock.h"
#include "core/cluster_token.h"
#include "core/config.h"
#include "core/http/client.h"
#include "core/http/server.h"
#include "core/log.h"
#include "router/admission.h"
#include "router/api_keys.h"
#include "router/carbon/gate.h"
#include "router/carbon/poller.h"
#include "router/dispatcher.h"
#include "router/intake.h"
#include "router/node_table.h"
#include "router/responses.h"
#include "router/router_metrics.h"

namespace cgn::router {

class GatewayHandlers;  // gateway.cpp: the route table's coroutines
class AdminApi;         // admin_api.h: /admin/v1/

enum class GatewayError { kConfig, kStart };

struct GatewayOptions {
  config::RouterConfig router;  // listen, limits, timeouts, routing, admission, TLS
  // Presented to agent nodes (NodeEndpoint::agent) on every request, never to bare endpoints
  // ([cluster]); with [tls] enabled, agent nodes are dialled over TLS with this certificate.
  auth::ClusterToken cluster_token;
  config::TlsConfig tls;
  size_t threads = 2;         // server workers
  std::string dashboard_dir;  // served at /dashboard/; empty = not served
  std::chrono::milliseconds mirror_interval{5000};
  size_t max_attempts = 3;  // per request, across nodes, before the first token
  uint64_t seed = 0;        // routing RNG (ties, random policy)
};

// "HOST:PORT" (IPv6 in brackets) -> host, port.
Result<std::pair<std::string, uint16_t>, GatewayError> parse_listen(std::string_view listen);

class Gateway {
 public:
  Gateway(GatewayOptions options, std::unique_ptr<cluster::StateStore> store, ApiKeys keys);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Starts the store, the maintenance thread and the server. Returns the bound port.
  Result<uint16_t, GatewayError> start();
  // Stops accepting, lets in-flight streams finish for up to `grace`, stops the store.
  void stop(std::chrono::milliseconds grace);
  // SIGHUP: applies the routing policy and weights of `cfg` (logs what changed, once). An
  // unknown policy name changes nothing and comes back as kConfig (listing the registered ones).
  Status<GatewayError> reload(const config::RouterConfig& cfg);

  void refresh_cluster_metrics();
  // Wakes the maintenance thread to refresh the cgn_cluster_node_* mirror now (any thread).
  void request_mirror_refresh();
  std::string render_metrics() { return metrics_.render(); }
  RouterMetrics& metrics() { return metrics_; }

  // Called (quickly, from any thread) after anything that may have changed healthy_nodes(): a
  // node's health turning, a node removed, gone stale, refused or readmitted. nullptr: nothing.
  void set_health_listener(std::function<void()> f);

  // Introspection, for tests and /health. A stale node (polled, no answer for max_staleness) is
  // not counted healthy.
  size_t healthy_nodes() const;
  size_t stale_nodes() const;
  size_t known_nodes() const;
  uint64_t inflight(std::string_view node) const;
  uint16_t port() const { return port_; }
  // The [router.metrics] listener's port; 0 when /metrics is on the API listener.
  uint16_t metrics_port() const { return metrics_port_; }
  RejectionLog& rejections() { return rejections_; }
  // The API listener's pipeline for requests made in process (the gRPC API, grpc_api/server.h):
  // its header check (API keys, refusals logged), its routes and its server. Set by start().
  const http::HeaderCheck& head_check() const { return head_check_; }
  const http::RouteTable& local_routes() const { return local_routes_; }
  http::Server* server() { return server_.get(); }
  // [router.carbon]: the gate and its poller; null when provider = "off".
  const carbon::Gate* carbon_gate() const { return carbon_gate_.get(); }
  const carbon::Poller* carbon_poller() const { return carbon_poller_.get(); }

 private:
  // start(), in two halves: the servers (API, metrics) and one upstream client per worker; then
  // the store and the listeners. The API listener's ServerConfig comes back for the start log.
  Result<http::ServerConfig, GatewayError> build_servers();
  Status<GatewayError> listen();
  void on_node_event(const cluster::NodeEvent& ev);
  // Counts every state event; applies prefixes, policy and backend state (state_backend.cpp).
  // Returns true when it handled `ev` (anything but kUpsert / kRemove).
  bool apply_state_event(const cluster::NodeEvent& ev);
  void maintenance_loop();
  // Passive health: nodes that refused a connection (NodeTable::mark_refused, from an attempt)
  // and were marked longer than passive_retry_ms ago go back into routing, so an etcd or gossip
  // node (never polled) is not lost to one refusal; the next request tries it and marks it again
  // if it still refuses.
  void readmit_refused();
  void log_stale_nodes(const std::vector<NodeSnapshot>& snap);
  // [router.carbon]: builds the gate and the poller (not started); kConfig for an unusable provider.
  Status<GatewayError> build_carbon();

  GatewayOptions options_;
  SteadyClock clock_;
  RouterMetrics metrics_;
  ApiKeys keys_;
  ApiKeys metrics_key_;      // [router.metrics] key_env; none: /metrics is open
  RejectionLog rejections_;  // intake refusals: counted, logged once per client per interval
  Admission admission_;
  log::StateChangeLogger node_changes_{log::get("router")};  // "node in routing" / "left" once per change

  NodeTable nodes_;
  ResponseAffinity responses_{clock_};  // /v1/responses: response id -> node (responses.h)
  GatewayServices services_;            // references to the members above, for the request path
  std::unique_ptr<AdminApi> admin_;     // its key set in build_servers()

  std::unique_ptr<GatewayHandlers> handlers_;
  http::HeaderCheck head_check_;   // the API listener's header check, for in-process requests too
  http::RouteTable local_routes_;  // the API listener's routes again, for in-process requests
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<http::Server> metrics_server_;  // [router.metrics] listen; null: /metrics on server_
  // One client per server worker, on that worker's io_context; declared after server_ so the
  // clients (and their pooled sockets) go before the contexts they live on.
  std::vector<std::unique_ptr<http::HttpClient>> clients_;
  std::unique_ptr<cluster::StateStore> store_;
  std::unique_ptr<carbon::Gate> carbon_gate_;
  std::unique_ptr<carbon::Poller> carbon_poller_;  // stopped before the gate goes

  std::mutex maint_mu_;
  std::condition_variable maint_cv_;
  bool maint_stop_ = false;
  bool maint_refresh_now_ = false;  // a node joined, left or changed health: refresh the mirror early
  std::thread maint_thread_;
  std::mutex refresh_mu_;  // refresh_cluster_metrics from the maintenance thread and tests
  double last_generation_tokens_ = 0;
  std::chrono::steady_clock::time_point last_refresh_{};

  uint16_t port_ = 0;
  uint16_t metrics_port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace cgn::router
