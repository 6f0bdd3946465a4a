#include "routing/router_core.h"

#include <algorithm>
#include <cmath>

#include "routing/policies.h"

namespace cgn::routing {

void order_for_decode(std::vector<Candidate>& ranked) {
  std::stable_sort(ranked.begin(), ranked.end(), [](const Candidate& a, const Candidate& b) {
    if (a.load != b.load) {
      return a.load < b.load;
    }
    return a.overlap_blocks > b.overlap_blocks;
  });
}

std::string_view to_string(RouteError e) {
  switch (e) {
    case RouteError::kNoNodes:
      return "no_nodes";
    case RouteError::kModelNotServed:
      return "model_not_served";
    case RouteError::kRoleMismatch:
      return "role_mismatch";
    case RouteError::kCapability:
      return "capability";
    case RouteError::kAllUnhealthy:
      return "all_unhealthy";
    case RouteError::kAllCordoned:
      return "all_cordoned";
    case RouteError::kAllOverloaded:
      return "all_overloaded";
    case RouteError::kTooManyDigests:
      return "too_many_digests";
  }
  return "no_nodes";
}

namespace {

bool capability_ok(const NodeState& s, const RouteRequest& r) {
  if (r.min_vram_mb != 0 && s.gpu.vram_total_mb != 0 && s.gpu.vram_total_mb < r.min_vram_mb) {
    return false;
  }
  if (r.require_gpu && s.gpu.known() && (s.gpu.vendor == "none" || s.gpu.vendor == "cpu")) {
    return false;
  }
  return true;
}

}  // namespace

RoutingCore::RoutingCore(const Clock& clock, RoutingPolicy policy, IndexConfig index_config, uint64_t seed,
                         RoutingLimits limits)
    : clock_(clock), policy_(policy), limits_(limits), index_(index_config), rng_(seed) {}

void RoutingCore::set_policy(const RoutingPolicy& policy) {
  policy_ = policy;
  for (size_t n = 0; n < slots_.size(); ++n) {
    if (slots_[n].live) {
      refresh_capacity(static_cast<NodeIndex>(n));
    }
  }
}

void RoutingCore::set_index_config(const IndexConfig& config) {
  index_.set_config(config);
}

uint32_t RoutingCore::tokens_per_block() const {
  const double t = policy_.weights.block_bytes / std::max(policy_.weights.bytes_per_token, 1e-9);
  return std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(t)));
}

uint64_t RoutingCore::prompt_tokens(const RouteRequest& r) const {
  return r.prompt_tokens != 0 ? r.prompt_tokens
                              : static_cast<uint64_t>(r.digests.size()) * tokens_per_block();
}

double RoutingCore::load_of(const Slot& s) const {
  return std::max(s.state.queue_depth + s.state.running, static_cast<double>(s.inflight_requests));
}

double RoutingCore::spread_load_of(const Slot& s) const {
  // Only the kv score charges decoding requests (running_seconds); for the policies that ignore
  // load (round_robin, random, session) the spread rule is the only thing that balances decodes.
  if (policy_.guard.spread_counts_running || !policy_.ranking->traits().guard_compares_waiting) {
    return load_of(s);
  }
  // Requests before their first token: the engine's queue, or this router's dispatches still in
  // prefill when the scrape predates them.
  return std::max(s.state.queue_depth, static_cast<double>(s.inflight_prefills));
}

double RoutingCore::estimate(const Slot& s, uint64_t prompt_tokens, float credited_blocks,
                             double* prefill_s) const {
  const ScoreWeights& w = policy_.weights;
  const NodeState& n = s.state;
  const double rate =
      n.prefill_tokens_per_s > 0 ? n.prefill_tokens_per_s : std::max(w.prefill_tokens_per_s, 1e-9);
  const double cached_tokens = static_cast<double>(credited_blocks) * tokens_per_block();
  const double uncached = std::max(0.0, static_cast<double>(prompt_tokens) - cached_tokens);
  const double prefill = uncached / rate;
  // The scrape may predate this router's latest dispatches; its own count of requests past their
  // first token is fresh (and a lower bound when several routers share the node).
  const double decoding =
      static_cast<double>(s.inflight_requests - std::min(s.inflight_requests, s.inflight_prefills));
  const double wait =
      std::max(n.queue_depth * w.queue_seconds,
               static_cast<double>(s.inflight_prefill_tokens) * w.inflight_prefill_weight / rate) +
      std::max(n.running, decoding) * w.running_seconds;
  double kv = 0;
  if (n.kv_used_ratio > w.kv_knee && w.kv_knee < 1.0) {
    kv = w.kv_pressure_seconds * (n.kv_used_ratio - w.kv_knee) / (1.0 - w.kv_knee);
  }
  double power = 0;
  if (n.watt_limit_watts > 0 && n.power_watts.value_or(0) > n.watt_limit_watts) {
    power = w.watt_penalty_seconds * (*n.power_watts - n.watt_limit_watts) / n.watt_limit_watts;
  }
  if (prefill_s != nullptr) {
    *prefill_s = prefill;
  }
  return prefill + wait + kv + power;
}

void RoutingCore::refresh_capacity(NodeIndex n) {
  const NodeState& s = slots_[n].state;
  index_.set_node_capacity(n, digest_capacity(s.total_blocks, s.block_size_tokens,
                                              policy_.weights.bytes_per_token, policy_.weights.block_bytes));
}

NodeIndex RoutingCore::find_node(std::string_view id) const {
  auto it = ids_.find(id);
  return it == ids_.end() ? kNoNode : it->second;
}

const NodeState* RoutingCore::node(NodeIndex n) const {
  return n < slots_.size() && slots_[n].live ? &slots_[n].state : nullptr;
}

bool RoutingCore::stale_at(const NodeState& s, Nanos now) const {
  return s.liveness == Liveness::kPolled && policy_.max_staleness > 0 &&
         now - s.refreshed_at > policy_.max_staleness;
}

bool RoutingCore::stale(NodeIndex n) const {
  return n < slots_.size() && slots_[n].live && stale_at(slots_[n].state, clock_.now());
}

uint64_t RoutingCore::inflight_requests(NodeIndex n) const {
  return n < slots_.size() && slots_[n].live ? slots_[n].inflight_requests : 0;
}

uint64_t RoutingCore::inflight_prefill_tokens(NodeIndex n) const {
  return n < slots_.size() && slots_[n].live ? slots_[n].inflight_prefill_tokens : 0;
}

NodeIndex RoutingCore::upsert_node(std::string_view id, const NodeUpdate& update, UpdateSource source) {
  NodeIndex n = find_node(id);
  bool created = false;
  if (n == kNoNode) {
    if (!free_slots_.empty()) {
      n = free_slots_.back();
      free_slots_.pop_back();
    } else if (slots_.size() < kMaxNodes) {
      n = static_cast<NodeIndex>(slots_.size());
      slots_.emplace_back();
    } else {
      return kNoNode;
    }
    Slot& s = slots_[n];
    const uint32_t gen = s.generation + 1;
    s = Slot{};
    s.generation = gen;
    s.live = true;
    s.state.id = std::string(id);
    s.id_hash = stable_hash(id);
    ids_.emplace(std::string(id), n);
    ++live_nodes_;
    created = true;
  }
  Slot& s = slots_[n];
  const uint64_t old_blocks = s.state.total_blocks;
  const uint32_t old_bs = s.state.block_size_tokens;
  if (apply_update(s.state, update, source, clock_.now()) && !created) {
    index_.clear_node(n);
  }
  if (created || old_blocks != s.state.total_blocks || old_bs != s.state.block_size_tokens) {
    refresh_capacity(n);
  }
  return n;
}

bool RoutingCore::remove_node(std::string_view id) {
  const NodeIndex n = find_node(id);
  if (n == kNoNode) {
    return false;
  }
  index_.clear_node(n);
  ids_.erase(ids_.find(id));
  Slot& s = slots_[n];
  s.live = false;
  s.inflight_requests = 0;
  s.inflight_prefill_tokens = 0;
  s.inflight_prefills = 0;
  free_slots_.push_back(n);
  --live_nodes_;
  return true;
}

void RoutingCore::confirm_prefixes(NodeIndex n, std::span<const Digest> digests, Tier tier) {
  if (node(n) != nullptr) {
    index_.confirm(n, digests, tier, clock_.now());
  }
}

void RoutingCore::remove_prefixes(NodeIndex n, std::span<const Digest> digests) {
  if (node(n) != nullptr) {
    index_.remove(n, digests);
  }
}

Result<Decision, RouteError> RoutingCore::decide(const RouteRequest& request) {
  Decision d;
  auto st = decide_into(request, d);
  if (!st.ok()) {
    return st.error();
  }
  return d;
}

Result<Decision, RouteError> RoutingCore::explain(const RouteRequest& request) {
  const Rng rng = rng_;
  const uint64_t rr = rr_counter_;
  auto d = decide(request);
  rng_ = rng;
  rr_counter_ = rr;
  return d;
}

Status<RouteError> RoutingCore::decide_into(const RouteRequest& request, Decision& out) {
  out.ranked.clear();
  out.policy = policy_.ranking;
  out.request_blocks = static_cast<uint32_t>(std::min<size_t>(request.digests.size(), UINT32_MAX));
  out.deadline_ok = true;
  out.guarded_out = 0;
  if (request.digests.size() > limits_.max_digests) {
    return make_error(RouteError::kTooManyDigests, "request has " + std::to_string(request.digests.size()) +
                                                       " digests, limit " +
                                                       std::to_string(limits_.max_digests));
  }
  const Nanos now = clock_.now();
  index_.maybe_sweep(now);
  if (live_nodes_ == 0) {
    return make_error(RouteError::kNoNodes, "no nodes are known");
  }

  // Eligibility, stage by stage, so that an empty result names the stage that emptied it.
  uint32_t served = 0;
  uint32_t role_ok = 0;
  uint32_t cap_ok = 0;
  uint32_t healthy = 0;
  eligible_.clear();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.live || !s.state.serves(request.model)) {
      continue;
    }
    ++served;
    if (!role_fits(s.state.role, request.role)) {
      continue;
    }
    ++role_ok;
    if (!capability_ok(s.state, request)) {
      continue;
    }
    ++cap_ok;
    if (s.state.health != Health::kHealthy || stale_at(s.state, now)) {
      continue;
    }
    ++healthy;
    if (s.state.cordoned) {
      continue;
    }
    eligible_.push_back(static_cast<NodeIndex>(i));
  }
  if (eligible_.empty()) {
    const std::string model(request.model);
    if (served == 0) {
      return make_error(RouteError::kModelNotServed, "no node serves model '" + model + "'");
    }
    if (role_ok == 0) {
      return make_error(RouteError::kRoleMismatch,
                        std::to_string(served) + " nodes serve '" + model + "', none in the wanted role");
    }
    if (cap_ok == 0) {
      return make_error(RouteError::kCapability,
                        std::to_string(role_ok) + " nodes filtered by min_vram_mb/require_gpu");
    }
    if (healthy == 0) {
      return make_error(RouteError::kAllUnhealthy, "all " + std::to_string(cap_ok) + " nodes for '" + model +
                                                       "' are unhealthy or stale");
    }
    return make_error(RouteError::kAllCordoned,
                      "all " + std::to_string(healthy) + " healthy nodes for '" + model + "' are cordoned");
  }

  // Load guard, before overlap: hard filters, then the spread rule.
  if (policy_.guard.enabled) {
    const LoadGuard& g = policy_.guard;
    const size_t before = eligible_.size();
    std::erase_if(eligible_, [&](NodeIndex n) {
      const NodeState& s = slots_[n].state;
      return s.queue_depth > g.max_queue_depth || s.kv_used_ratio > g.max_kv_used;
    });
    if (eligible_.empty()) {
      out.guarded_out = static_cast<uint32_t>(before);
      return make_error(RouteError::kAllOverloaded, "all " + std::to_string(before) +
                                                        " eligible nodes are over the load guard (queue > " +
                                                        std::to_string(g.max_queue_depth) + " or kv_used > " +
                                                        std::to_string(g.max_kv_used) + ")");
    }
    double min_load = spread_load_of(slots_[eligible_.front()]);
    for (NodeIndex n : eligible_) {
      min_load = std::min(min_load, spread_load_of(slots_[n]));
    }
    std::erase_if(eligible_, [&](NodeIndex n) {
      const double l = spread_load_of(slots_[n]);
      return l - min_load >= g.spread_abs && l >= g.spread_rel * (min_load + 1.0);
    });
    out.guarded_out = static_cast<uint32_t>(before - eligible_.size());
  }

  const uint64_t tokens = prompt_tokens(request);
  index_.match(request.digests, policy_.weights.credit, slots_.size(), overlap_);
  for (NodeIndex n : eligible_) {
    const Slot& s = slots_[n];
    Candidate c;
    c.node = n;
    c.overlap_blocks = overlap_.run(n);
    c.guessed_blocks = overlap_.guessed(n);
    c.credited_blocks = overlap_.credit(n);
    double prefill = 0;
    c.ttft_s = estimate(s, tokens, c.credited_blocks, &prefill);
    c.cost = c.ttft_s + (std::max(policy_.weights.uncached_weight, 0.0) - 1.0) * prefill;
    c.load = load_of(s);
    out.ranked.push_back(c);
  }
  rank(request, out);
  if (request.deadline > 0) {
    out.deadline_ok = out.ranked.front().ttft_s * 1e9 <= static_cast<double>(request.deadline);
  }
  return Ok{};
}

void RoutingCore::rank(const RouteRequest& request, Decision& out) {
  auto& c = out.ranked;
  const size_t n = c.size();
  const Policy& policy = policy_.ranking->for_request(request);
  out.policy = &policy;
  if (n <= 1) {
    return;
  }
  auto& items = sort_items_;
  auto& tmp = sort_tmp_;
  items.clear();
  policy.sort_keys(RankInput{request, c, *this, rng_, rr_counter_, std::max(policy_.tie_epsilon_s, 1e-12)},
                   items);
  std::sort(items.begin(), items.end());
  tmp.assign(c.begin(), c.end());
  for (size_t i = 0; i < n; ++i) {
    c[i] = tmp[items[i].i];
  }
  if (policy.traits().samples_first_choice && policy_.temperature_s > 0) {
    // Softmax over the costs for the first choice; the rest keep their order.
    const double best = c.front().cost;
    double total = 0;
    for (const auto& x : c) {
      total += std::exp(-(x.cost - best) / policy_.temperature_s);
    }
    double pick = rng_.uniform01() * total;
    size_t chosen = n - 1;
    for (size_t i = 0; i < n; ++i) {
      pick -= std::exp(-(c[i].cost - best) / policy_.temperature_s);
      if (pick < 0) {
        chosen = i;
        break;
      }
    }
    std::rotate(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(chosen),
                c.begin() + static_cast<std::ptrdiff_t>(chosen) + 1);
  }
}

DispatchTicket RoutingCore::record_dispatch(NodeIndex node, const RouteRequest& request) {
  DispatchTicket t;
  if (node >= slots_.size() || !slots_[node].live) {
    return t;
  }
  Slot& s = slots_[node];
  // The uncached prefill as the node stands now (before this request's entries are added).
  index_.match(request.digests, policy_.weights.credit, slots_.size(), overlap_);
  const double cached = static_cast<double>(overlap_.credit(node)) * tokens_per_block();
  const double tokens = static_cast<double>(prompt_tokens(request));
  t.prefill_tokens = static_cast<uint64_t>(std::max(0.0, tokens - cached));
  index_.record_optimistic(node, request.digests, clock_.now());
  t.node = node;
  t.generation = s.generation;
  t.open = true;
  t.prefill_open = true;
  s.inflight_requests += 1;
  s.inflight_prefills += 1;
  s.inflight_prefill_tokens += t.prefill_tokens;
  return t;
}

void RoutingCore::record_first_token(DispatchTicket& t) {
  if (!t.open || !t.prefill_open) {
    return;
  }
  t.prefill_open = false;
  if (t.node < slots_.size() && slots_[t.node].live && slots_[t.node].generation == t.generation) {
    Slot& s = slots_[t.node];
    s.inflight_prefill_tokens -= std::min(s.inflight_prefill_tokens, t.prefill_tokens);
    s.inflight_prefills -= std::min<uint64_t>(s.inflight_prefills, 1);
  }
}

void RoutingCore::record_completion(DispatchTicket& t) {
  if (!t.open) {
    return;
  }
  record_first_token(t);
  t.open = false;
  if (t.node < slots_.size() && slots_[t.node].live && slots_[t.node].generation == t.generation) {
    Slot& s = slots_[t.node];
    s.inflight_requests -= std::min<uint64_t>(s.inflight_requests, 1);
  }
}

}  // namespace cgn::routing
