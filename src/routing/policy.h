// Routing policy and weights: plain data, swappable at run time (RoutingCore::set_policy). The
// ranking policy itself is an object registered by name (policies.h). Defaults and tuning
// advice: docs/architecture/routing.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/clock.h"
#include "core/routing_defaults.h"
#include "routing/prefix_index.h"

namespace cgn::routing {

class Policy;  // policies.h: registered by name (kv, round_robin, random, least_load, session)

// The kv policy: what a default RoutingPolicy ranks by.
const Policy* default_policy();

// The TTFT estimate (seconds) of node n for a request:
//   uncached = max(0, prompt_tokens - credited_blocks * tokens_per_block)
//   prefill  = uncached / rate(n)
//   wait     = max(queue_depth * queue_seconds,
//                  inflight_prefill_tokens * inflight_prefill_weight / rate(n))
//              + running * running_seconds
//   kv       = kv_used > kv_knee ? kv_pressure_seconds * (kv_used - kv_knee) / (1 - kv_knee) : 0
//   power    = power > watt_limit > 0 ? watt_penalty_seconds * (power - watt_limit) / watt_limit : 0
//   ttft     = prefill + wait + kv + power
// where running = max(scraped running, this router's requests to n past their first token), so a
// scrape up to an interval old cannot hide the router's own recent dispatches.
// The kv policy ranks by cost = ttft + (uncached_weight - 1) * prefill: a token the node must
// prefill is paid by every request queued behind it, not only by this one, and a second copy
// of a prefix takes cache space from others, so cache misses weigh more than the wait this
// request would see (uncached_weight = 1: pure TTFT; the default 5 was chosen on one half of the
// conversation trace and is reported on the other, docs/architecture/routing.md).
// Defaults: core/routing_defaults.h, shared with cognitora.toml's [router.routing.weights].
struct ScoreWeights {
  // default node prefill speed when a node reports none
  double prefill_tokens_per_s = routing_defaults::prefill_tokens_per_s(
      routing_defaults::kPrefillMsPerBlock, routing_defaults::kBlockBytes, routing_defaults::kBytesPerToken);
  // expected wait per request already queued on the node
  double queue_seconds = routing_defaults::ms_to_s(routing_defaults::kQueueMsPerRequest);
  // slowdown per running (decoding) request
  double running_seconds = routing_defaults::ms_to_s(routing_defaults::kRunningMsPerRequest);
  // multiplier on this router's own in-flight prefill tokens to the node (the wait term)
  double inflight_prefill_weight = routing_defaults::kInflightPrefillWeight;
  double uncached_weight = routing_defaults::kUncachedWeight;  // kv ranking: uncached prefill vs wait
  double kv_knee = routing_defaults::kKvKnee;
  double kv_pressure_seconds = routing_defaults::ms_to_s(routing_defaults::kKvPressureMs);
  double watt_penalty_seconds = routing_defaults::ms_to_s(routing_defaults::kPowerPenaltyMs);
  TierCredit credit;                                     // engine 1.0, RAM 0.75, SSD 0.25, optimistic x1.0
  uint32_t block_bytes = routing_defaults::kBlockBytes;  // canonical prompt bytes per digest
  double bytes_per_token = routing_defaults::kBytesPerToken;
  bool operator==(const ScoreWeights&) const = default;
};

// Applied before overlap: cache affinity must never pile a hot prefix onto an overloaded node.
// load(n) = max(queue_depth + running, router in-flight requests to n) (least_load, Candidate::load);
// under the kv policy the spread rule compares waiting(n) = max(queue_depth, router in-flight
// requests to n still before their first token): the requests a new one would queue behind.
// Decoding requests cost a new request only their share of each step, which the kv score already
// charges (running_seconds), and their KV, which the max_kv_used filter bounds. The other
// policies ignore load, so for them the spread rule keeps comparing load(n).
struct LoadGuard {
  bool enabled = true;
  double max_queue_depth = routing_defaults::kMaxQueueDepth;  // hard filter: more waiting: skipped
  double max_kv_used = routing_defaults::kMaxKvUsed;          // hard filter: nodes with fuller KV are skipped
  // Spread rule: node n is skipped when w(n) - min_w >= spread_abs and w(n) >= spread_rel *
  // (min_w + 1), min over the nodes left by the hard filters; w = waiting (kv) or load (others).
  double spread_abs = routing_defaults::kSpreadMinGap;
  double spread_rel = routing_defaults::kSpreadRatio;
  // true: the kv policy's spread rule compares load(n) (decoding requests too), as before
  // 2026-11-30; for comparison runs (`cgn-bench sim --guard-counts-running`), not a tuning knob.
  bool spread_counts_running = false;
  bool operator==(const LoadGuard&) const = default;
};

struct RoutingPolicy {
  const Policy* ranking = default_policy();  // never null; lives as long as its registry
  ScoreWeights weights;
  LoadGuard guard;
  // kv policy only (Policy::Traits::samples_first_choice): 0 = always the lowest estimate (random among exact
  // ties); > 0 = softmax sampling of the first choice, p ~ exp(-(ttft - best) / temperature_s).
  double temperature_s = routing_defaults::ms_to_s(routing_defaults::kTemperatureMs);
  // Polled nodes (Liveness::kPolled) whose state was not refreshed for this long are treated as
  // unhealthy (0 = never). Nodes a backend removes when they die (kMembership) never go stale.
  Nanos max_staleness = static_cast<Nanos>(routing_defaults::kMaxStalenessMs) * kNanosPerMilli;
  // Estimates that differ by less than this are ties (broken at random).
  double tie_epsilon_s = 1e-6;
  bool operator==(const RoutingPolicy&) const = default;
};

}  // namespace cgn::routing
