// RoutingCore: the routing decision, with no sockets and no wall clock, so that the gateway,
// the agent and the deterministic benchmark run the very same code.
//
// It owns the node table, the prefix index, the router's own in-flight accounting, the
// policy and the seedable RNG. decide() ranks the eligible nodes best first (so the caller
// can fail over to the next), record_dispatch() adds optimistic index entries and in-flight
// prefill, record_first_token()/record_completion() release it.
//
// Thread-safety: none. One owner (e.g. the gateway's routing strand) calls everything; the
// Clock must outlive the core. All time comes from the injected Clock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/digest_types.h"
#include "core/result.h"
#include "routing/node_state.h"
#include "routing/policy.h"
#include "routing/prefix_index.h"
#include "routing/rng.h"
#include "routing/types.h"

namespace cgn::routing {

// Why no node was eligible: the filter stage at which the last candidate dropped out.
enum class RouteError : uint8_t {
  kNoNodes,         // the table is empty
  kModelNotServed,  // no node serves the model
  kRoleMismatch,    // nodes serve the model, none in the wanted role
  kCapability,      // filtered by min_vram_mb / require_gpu
  kAllUnhealthy,    // unhealthy, unknown health, or stale
  kAllCordoned,
  kAllOverloaded,   // every node failed the load guard's hard filters
  kTooManyDigests,  // request exceeds max_digests
};

std::string_view to_string(RouteError e);

// A typed view of one request; the caller owns the referenced data for the call.
struct RouteRequest {
  std::string_view model;
  RoleWanted role = RoleWanted::kAny;
  std::span<const Digest> digests;  // the prompt's chained block digests, in order
  // Prompt length in tokens (estimate: bytes / 4). 0 = digests.size() * tokens per block.
  uint64_t prompt_tokens = 0;
  std::string_view session_key;  // session policy; empty = fall back to kv
  Nanos deadline = 0;            // relative TTFT budget; 0 = none
  uint64_t min_vram_mb = 0;
  bool require_gpu = false;
};

struct Candidate {
  NodeIndex node = kNoNode;
  double ttft_s = 0;            // the estimate (docs/design/principles.md), for every policy
  double cost = 0;              // what the kv policy ranks by: ttft_s + (uncached_weight - 1) * prefill
  uint32_t overlap_blocks = 0;  // leading digests the node holds
  uint32_t guessed_blocks = 0;  // of those, optimistic entries the node has not confirmed
  float credited_blocks = 0;    // overlap after tier / optimistic credit
  double load = 0;              // load(n) as the load guard sees it
};

// The prefill/decode split's decode ordering (the router's P/D plan and the simulated one):
// least loaded first, then the longest overlap; stable otherwise.
void order_for_decode(std::vector<Candidate>& ranked);

struct Decision {
  const Policy* policy = nullptr;  // the policy that ranked (session without a key: kv)
  std::vector<Candidate> ranked;   // best first; never empty in a successful decision
  uint32_t request_blocks = 0;
  // False when a deadline was given and even the best estimate exceeds it (the caller may
  // reject the request: deadline admission).
  bool deadline_ok = true;
  // How many nodes the load guard removed (hard filters + spread rule).
  uint32_t guarded_out = 0;
};

// Returned by record_dispatch; hand it back on first token and on completion.
struct DispatchTicket {
  NodeIndex node = kNoNode;
  uint32_t generation = 0;
  uint64_t prefill_tokens = 0;
  bool prefill_open = false;
  bool open = false;
};

// One candidate's place in the ranking, as a policy keys it (policies.h); sorted ascending.
struct RankKey {
  int64_t primary;
  uint64_t secondary;  // kv: guessed blocks (a confirmation outranks a guess); else 0
  uint64_t tie;
  uint32_t i;  // the candidate's position in Decision::ranked before sorting
  bool operator<(const RankKey& o) const {
    if (primary != o.primary) {
      return primary < o.primary;
    }
    if (secondary != o.secondary) {
      return secondary < o.secondary;
    }
    return tie != o.tie ? tie < o.tie : i < o.i;
  }
};

struct RoutingLimits {
  uint32_t max_digests = 8192;  // per request
};

class RoutingCore {
 public:
  RoutingCore(const Clock& clock, RoutingPolicy policy = {}, IndexConfig index_config = {}, uint64_t seed = 0,
              RoutingLimits limits = {});

  // Policy and weights are plain data; a new policy applies to the next decision.
  void set_policy(const RoutingPolicy& policy);
  const RoutingPolicy& policy() const { return policy_; }
  void set_index_config(const IndexConfig& config);
  void reseed(uint64_t seed) { rng_.reseed(seed); }

  // --- node state: every source goes through here ---
  // Creates the node on first sight. Returns its dense index, or kNoNode when the table is
  // full (kMaxNodes). A kv_epoch change clears the node's index entries; a total_blocks or
  // block size change resizes its index capacity (and prunes).
  NodeIndex upsert_node(std::string_view id, const NodeUpdate& update, UpdateSource source);
  // Removes the node and everything the index holds for it. Outstanding tickets become void.
  bool remove_node(std::string_view id);
  NodeIndex find_node(std::string_view id) const;
  const NodeState* node(NodeIndex n) const;
  const NodeState* node(std::string_view id) const { return node(find_node(id)); }
  size_t node_count() const { return live_nodes_; }
  // True when node n is polled (Liveness::kPolled) and its state is older than the policy's
  // max_staleness: it is not routed to until its next update.
  bool stale(NodeIndex n) const;
  uint64_t inflight_requests(NodeIndex n) const;
  uint64_t inflight_prefill_tokens(NodeIndex n) const;
  // stable_hash (rng.h) of node n's id, for the session policy's rendezvous hashing.
  uint64_t node_id_hash(NodeIndex n) const { return slots_[n].id_hash; }

  // --- live KV prefixes (etcd) ---
  void confirm_prefixes(NodeIndex n, std::span<const Digest> digests, Tier tier = Tier::kEngine);
  void remove_prefixes(NodeIndex n, std::span<const Digest> digests);

  // --- the decision ---
  Result<Decision, RouteError> decide(const RouteRequest& request);
  // Same, reusing `out` (and its vector capacity): the allocation-free hot path.
  Status<RouteError> decide_into(const RouteRequest& request, Decision& out);
  // A dry run of decide(): the same decision, but the RNG and the round-robin counter are put
  // back afterwards, so the next decide() for the same request and state decides the same.
  Result<Decision, RouteError> explain(const RouteRequest& request);

  // --- dispatch accounting ---
  // The request was sent to `node`: its digests become optimistic entries there and its
  // uncached prefill (estimated from the overlap at this moment) counts as in flight.
  DispatchTicket record_dispatch(NodeIndex node, const RouteRequest& request);
  // Prefill is over (first token seen): releases the in-flight prefill.
  void record_first_token(DispatchTicket& ticket);
  // The request ended (any outcome): releases whatever the ticket still holds.
  void record_completion(DispatchTicket& ticket);

  const PrefixIndex& index() const { return index_; }
  PrefixIndex& index() { return index_; }

 private:
  struct Slot {
    NodeState state;
    bool live = false;
    uint32_t generation = 0;
    uint64_t id_hash = 0;
    uint64_t inflight_requests = 0;
    uint64_t inflight_prefill_tokens = 0;
    uint64_t inflight_prefills = 0;  // dispatched requests still before their first token
  };

  bool stale_at(const NodeState& s, Nanos now) const;
  uint32_t tokens_per_block() const;
  uint64_t prompt_tokens(const RouteRequest& r) const;
  double load_of(const Slot& s) const;
  // What the guard's spread rule compares (LoadGuard::spread_counts_running).
  double spread_load_of(const Slot& s) const;
  // The TTFT estimate; `prefill_s` receives its prefill part.
  double estimate(const Slot& s, uint64_t prompt_tokens, float credited_blocks, double* prefill_s) const;
  void refresh_capacity(NodeIndex n);
  void rank(const RouteRequest& request, Decision& out);

  const Clock& clock_;
  RoutingPolicy policy_;
  RoutingLimits limits_;
  PrefixIndex index_;
  Rng rng_;
  std::vector<Slot> slots_;
  std::vector<NodeIndex> free_slots_;
  size_t live_nodes_ = 0;
  uint64_t rr_counter_ = 0;

  std::map<std::string, NodeIndex, std::less<>> ids_;
  // Scratch reused by every decision.
  OverlapScratch overlap_;
  std::vector<NodeIndex> eligible_;
  std::vector<RankKey> sort_items_;
  std::vector<Candidate> sort_tmp_;
};

}  // namespace cgn::routing
