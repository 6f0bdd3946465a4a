// NodeTable: the router's view of its nodes. It owns the RoutingCore (routing state, prefix
// index, in-flight accounting) and the endpoint of every node, behind one mutex, and offers the
// few operations the request path needs, each one short critical section:
//
//   lookup(model)          -> is the model served, and disaggregated?      (1 lock)
//   rank(rr, max, decode)  -> the decision and the ranked targets          (1 lock)
//   dispatch / first_token / complete -> the in-flight ticket of one attempt (1 lock each;
//                            finish() does first token + completion in one)
//
// so a buffered aggregated request takes the lock 3 times (it took it 6 times when the gateway
// held the core itself). Why one mutex rather than a striped or per-thread core: decide() reads
// every node's load and the whole prefix index and record_dispatch() writes both, so any split
// needs a merge step whose cost is of the order of the decision itself; measured with 1 vs 2
// server workers (docs/architecture/router.md, "Locking"), the lock is not where the second
// worker's time goes. The critical sections stay microseconds: no I/O, no logging, no allocation beyond the
// decision's vectors.
//
// Targets: a Target is what one attempt dials. A node target carries its routing index; a
// federation peer (an upstream URL that is not in this table) carries kNoNode, and every
// bookkeeping call here is a no-op for it.
//
// Threads: every method is safe from any thread (server workers, the store's event thread, the
// maintenance thread). locked() runs `f(core, nodes)` under the mutex, for the state-event code
// and the metrics mirror; `f` must not block.
//
// Health listener: called, outside the table's mutex, after anything that may have changed which
// nodes are healthy: passive refusal and readmission here, and whatever the owner reports with
// notify_health() (its state events, staleness). The gRPC health service follows it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/state_store.h"
#include "core/clock.h"
#include "core/result.h"
#include "routing/router_core.h"

namespace cgn::router {

// One attempt's upstream: a node of the table, or a federation peer (index == kNoNode).
struct Target {
  std::string node;  // the node's name, or the peer's label (X-CGN-Node)
  cluster::NodeEndpoint endpoint;
  routing::NodeIndex index = routing::kNoNode;
  bool peer() const { return index == routing::kNoNode; }
};

class NodeTable {
 public:
  struct NodeInfo {
    std::string name;
    cluster::NodeEndpoint endpoint;
    routing::NodeIndex index = routing::kNoNode;
    // Set when the node refused a connection and left routing (passive health); cleared when it
    // is let back in after [router.timeouts] passive_retry_ms.
    std::optional<std::chrono::steady_clock::time_point> refused_at;
  };
  using Nodes = std::map<std::string, NodeInfo, std::less<>>;

  NodeTable(const Clock& clock, routing::RoutingPolicy policy, routing::IndexConfig index, uint64_t seed);

  struct ModelInfo {
    bool served = false;         // some node serves it
    bool disaggregated = false;  // a node serving it has the role prefill or decode
  };
  ModelInfo lookup(std::string_view model) const;
  // Models of healthy, uncordoned nodes (/v1/models).
  std::set<std::string> healthy_models() const;

  struct Ranked {
    routing::Decision decision;
    std::vector<Target> targets;  // the first `max` ranked nodes, resolved to endpoints
    double decide_s = 0;          // time spent in decide()
  };
  // decide(rr); with `decode_order`, candidates are ordered for a decode leg (disagg.h).
  Result<Ranked, routing::RouteError> rank(const routing::RouteRequest& rr, size_t max, bool decode_order);

  // In-flight accounting of one attempt; no-ops for a peer target.
  routing::DispatchTicket dispatch(const Target& t, const routing::RouteRequest& rr);
  void first_token(routing::DispatchTicket& ticket);
  void complete(routing::DispatchTicket& ticket);
  // first_token (when `answered`) and complete, in one critical section.
  void finish(routing::DispatchTicket& ticket, bool answered);

  // Passive health: `node` refused a connection and leaves routing now.
  void mark_refused(std::string_view node);
  // Nodes marked longer than `retry` ago, whose unhealthy verdict is still our own, go back into
  // routing; returns their names.
  std::vector<std::string> readmit_refused(std::chrono::milliseconds retry);

  // `f` (or nothing) is called by notify_health(); it must be quick and must not call back into
  // the table. Setting it waits for a call in progress, so the old one is not called afterwards.
  void set_health_listener(std::function<void()> f);
  void notify_health() const;

  size_t healthy_nodes() const;
  size_t stale_nodes() const;
  size_t known_nodes() const;
  uint64_t inflight(std::string_view node) const;
  size_t index_entries() const;

  template <class F>
  auto locked(F&& f) {
    std::lock_guard lock(mu_);
    return f(core_, nodes_);
  }

 private:
  mutable std::mutex mu_;
  routing::RoutingCore core_;
  Nodes nodes_;
  mutable std::mutex listener_mu_;  // never taken inside mu_'s critical sections
  std::function<void()> health_listener_;
};

}  // namespace cgn::router
