// `cgn-bench sim --tiers`: what KV offload tiers (cluster_sim_tiers.h) buy on a workload. Per load
// level, four configurations on the same arrivals: kv routing without tiers, kv routing with
// tiers (and the router's tier credit), round_robin with tiers, and disagg-cgn (a prefill pool
// and a decode pool, every node offloading to its tiers). Reported: prefix hit rate by tier
// (HBM / RAM / SSD), TTFT p50/p90, recomputed prompt tokens (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_harness/cluster_sim.h"

namespace cgn::bench {

struct TierRow {
  std::string config;  // "kv", "kv+tiers", "round_robin+tiers", "disagg-cgn P:D"
  PolicyResult r;
};

struct TierLevelReport {
  LoadLevel level;
  std::vector<TierRow> rows;
};

// c.tiers sizes the tiers of the configurations that have them; pd_prefill nodes prefill in
// disagg-cgn (0: no disagg-cgn row).
std::vector<TierLevelReport> run_tier_comparison(const Workload& w, const ClusterConfig& c,
                                                 const std::vector<double>& levels, uint32_t pd_prefill);

std::string render_tier_markdown(const std::vector<TierLevelReport>& r, const ClusterConfig& c);

}  // namespace cgn::bench
