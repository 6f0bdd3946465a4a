// The routing defaults, declared once. cognitora.toml's [router.routing] (milliseconds, what an
// operator writes: core/config.h) and the routing core's RoutingPolicy / IndexConfig (seconds and
// tokens: routing/policy.h, routing/prefix_index.h) both start from these values, so cgn-router
// (policy_from_config of a default RouterConfig) and cgn-bench sim (a default RoutingPolicy) run
// the same policy. router/policy_config_test.cpp fails when the two drift.
//
// The values are the ones the routing report was measured with (docs/architecture/routing.md);
// uncached_weight was chosen on the even half of the conversation trace (scripts/bench-tune.sh).
#pragma once

#include <cstdint>

namespace cgn::routing_defaults {

inline constexpr uint32_t kBlockBytes = 256;       // canonical prompt bytes per digest block
inline constexpr double kBytesPerToken = 4.0;      // prompt bytes per token (block <-> token)
inline constexpr double kPrefillMsPerBlock = 8.0;  // 64 tokens per block at 8000 tokens/s
inline constexpr double kQueueMsPerRequest = 100.0;
inline constexpr double kRunningMsPerRequest = 5.0;
inline constexpr double kInflightPrefillWeight = 1.0;
inline constexpr double kUncachedWeight = 5.0;
inline constexpr double kKvKnee = 0.8;
inline constexpr double kKvPressureMs = 1000.0;
inline constexpr double kPowerPenaltyMs = 500.0;
inline constexpr float kRamTierCredit = 0.75F;
inline constexpr float kSsdTierCredit = 0.25F;
inline constexpr double kTemperatureMs = 0.0;

inline constexpr uint32_t kMaxQueueDepth = 64;
inline constexpr double kMaxKvUsed = 0.97;
inline constexpr uint32_t kSpreadMinGap = 8;
inline constexpr double kSpreadRatio = 2.0;

inline constexpr uint32_t kIndexTtlS = 120;
inline constexpr uint32_t kMaxStalenessMs = 30000;
// 0: sized from the engines' capacity (the sum of every node's digest capacity).
inline constexpr uint64_t kIndexMaxEntries = 0;

// The unit conversions policy_from_config applies, so both sides compute the same numbers.
constexpr double prefill_tokens_per_s(double prefill_ms_per_block, uint32_t block_bytes,
                                      double bytes_per_token) {
  const double tokens_per_block = block_bytes / bytes_per_token;
  return prefill_ms_per_block > 0 ? tokens_per_block / (prefill_ms_per_block / 1000.0) : 1e12;
}
constexpr double ms_to_s(double ms) {
  return ms / 1000.0;
}

}  // namespace cgn::routing_defaults
