#include "router/policy_config.h"

#include <fmt/format.h>

namespace cgn::router {

Result<routing::RoutingPolicy, routing::PolicyError> policy_from_config(const config::RouterConfig& cfg) {
  auto ranking = routing::find_policy(cfg.policy);
  if (!ranking) {
    return ranking.error();
  }
  routing::RoutingPolicy p;
  p.ranking = *ranking;
  const auto& w = cfg.routing.weights;
  auto& s = p.weights;
  s.block_bytes = cfg.routing.block_bytes;
  // prefill_ms_per_block is a cost per block; the core wants a speed in tokens per second.
  s.prefill_tokens_per_s =
      routing_defaults::prefill_tokens_per_s(w.prefill_ms_per_block, s.block_bytes, s.bytes_per_token);
  s.queue_seconds = routing_defaults::ms_to_s(w.queue_ms_per_request);
  s.running_seconds = routing_defaults::ms_to_s(w.running_ms_per_request);
  s.inflight_prefill_weight = w.inflight_prefill_weight;
  s.uncached_weight = w.uncached_weight;
  s.kv_knee = w.kv_knee;
  s.kv_pressure_seconds = routing_defaults::ms_to_s(w.kv_pressure_ms);
  s.watt_penalty_seconds = routing_defaults::ms_to_s(w.power_penalty_ms);
  s.credit.ram = static_cast<float>(w.ram_tier_credit);
  s.credit.ssd = static_cast<float>(w.ssd_tier_credit);
  p.temperature_s = routing_defaults::ms_to_s(w.temperature);
  const auto& g = cfg.routing.load_guard;
  p.guard.max_queue_depth = g.max_queue_depth;
  p.guard.max_kv_used = g.max_kv_used;
  p.guard.spread_abs = g.spread_min_gap;
  p.guard.spread_rel = g.spread_ratio;
  p.max_staleness = static_cast<Nanos>(cfg.routing.max_staleness_ms) * kNanosPerMilli;
  return p;
}

routing::IndexConfig index_from_config(const config::RouterConfig& cfg) {
  routing::IndexConfig c;
  c.optimistic_ttl = static_cast<Nanos>(cfg.routing.index_ttl_s) * kNanosPerSecond;
  c.max_entries = cfg.routing.index_max_entries;
  return c;
}

std::string describe_policy_change(const routing::RoutingPolicy& a, const routing::RoutingPolicy& b) {
  std::string out;
  auto add = [&](std::string_view name, const auto& x, const auto& y) {
    if (x != y) {
      if (!out.empty()) {
        out += ", ";
      }
      out += fmt::format("{} {} -> {}", name, x, y);
    }
  };
  add("policy", a.ranking->name(), b.ranking->name());
  add("prefill_tokens_per_s", a.weights.prefill_tokens_per_s, b.weights.prefill_tokens_per_s);
  add("queue_seconds", a.weights.queue_seconds, b.weights.queue_seconds);
  add("running_seconds", a.weights.running_seconds, b.weights.running_seconds);
  add("inflight_prefill_weight", a.weights.inflight_prefill_weight, b.weights.inflight_prefill_weight);
  add("uncached_weight", a.weights.uncached_weight, b.weights.uncached_weight);
  add("kv_knee", a.weights.kv_knee, b.weights.kv_knee);
  add("kv_pressure_seconds", a.weights.kv_pressure_seconds, b.weights.kv_pressure_seconds);
  add("watt_penalty_seconds", a.weights.watt_penalty_seconds, b.weights.watt_penalty_seconds);
  add("ram_credit", a.weights.credit.ram, b.weights.credit.ram);
  add("ssd_credit", a.weights.credit.ssd, b.weights.credit.ssd);
  add("block_bytes", a.weights.block_bytes, b.weights.block_bytes);
  add("temperature_s", a.temperature_s, b.temperature_s);
  add("max_queue_depth", a.guard.max_queue_depth, b.guard.max_queue_depth);
  add("max_kv_used", a.guard.max_kv_used, b.guard.max_kv_used);
  add("spread_abs", a.guard.spread_abs, b.guard.spread_abs);
  add("spread_rel", a.guard.spread_rel, b.guard.spread_rel);
  add("max_staleness_s", static_cast<double>(a.max_staleness) / kNanosPerSecond,
      static_cast<double>(b.max_staleness) / kNanosPerSecond);
  return out;
}

}  // namespace cgn::router
