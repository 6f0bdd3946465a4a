// Disaggregated prefill/decode in the deterministic cluster simulator (`cgn-bench sim
// --pd-prefill N`): the same workload, arrivals and node count as an aggregated run, with the
// first N simulated engines in the role prefill and the rest in the role decode. The router's
// two legs are replayed in virtual time exactly as the gateway runs them (router/disagg.h):
//
//   1. prefill leg: RoutingCore::decide over prefill nodes (kv score), a request with
//      max_tokens 1 and kv_transfer_params {do_remote_decode: true};
//   2. when it finishes: decide over decode nodes, re-ranked by load then overlap (the router's
//      routing::order_for_decode), the client's request with the returned params (none: recompute);
//   3. the decode engine's kKvPull is answered by claim_blocks() on the named prefill engine;
//      the decode engine then charges the simulator's transfer time
//      (kv_transfer_fixed + tokens * kv_transfer_per_token, docs/sim.md) and decodes.
//
// TTFT is from arrival to the decode leg's first token; ITL is the decode leg's. No sockets, no
// wall clock: the same inputs give the same numbers. Reentrant; runs share nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_harness/cluster_sim.h"

namespace cgn::bench {

struct PdResult {
  PolicyResult r;  // policy "pd P:D"; per-node busy and counts over all nodes
  uint32_t prefill_nodes = 0;
  uint32_t decode_nodes = 0;
  uint64_t pulls_ok = 0;               // decode legs that pulled the prompt's blocks
  uint64_t pulls_failed = 0;           // claims that failed (expired, unknown): decode recomputed
  uint64_t recomputes = 0;             // prefill answered without params: decode recomputed
  uint64_t fallbacks = 0;              // no prefill node eligible: served aggregated on a decode node
  uint64_t transferred_tokens = 0;     // tokens moved by pulls
  uint64_t decode_loaded_tokens = 0;   // handed-off decode legs: loaded from their own node's tiers
  double prefill_utilisation = 0;      // busy / makespan, mean over the prefill pool
  double decode_utilisation = 0;       // over the decode pool
  double prefill_max_utilisation = 0;  // the busiest prefill node's busy / makespan
  // TTFT split at the handoff: arrival -> prefill answer, and prefill answer -> decode first
  // token (claim, transfer, queueing on the decode node, one step).
  double prefill_leg_p50_s = 0, prefill_leg_p90_s = 0;
  double decode_ttft_p50_s = 0, decode_ttft_p90_s = 0;
};

// One disaggregated run: nodes [0, prefill_nodes) prefill, the rest decode (both pools non-empty).
PdResult run_pd(const Workload& w, const LoadLevel& level, uint32_t prefill_nodes, const ClusterConfig& c);

// Aggregated (kv policy, every node both) against each prefill/decode split, at each level (the
// aggregated run's round_robin-equivalent utilisation; the same arrivals for every row).
struct PdLevelReport {
  LoadLevel level;
  PolicyResult aggregated;
  std::vector<PdResult> splits;  // in prefill_counts order
};
struct PdReport {
  std::string workload;
  uint32_t nodes = 0;
  size_t requests = 0;
  double mean_input_tokens = 0;
  double mean_output_tokens = 0;
  double slo_ttft_s = 0, slo_itl_s = 0;
  std::vector<uint32_t> prefill_counts;
  std::vector<PdLevelReport> levels;
};

PdReport run_pd_comparison(const Workload& w, const ClusterConfig& c, const std::vector<double>& levels,
                           const std::vector<uint32_t>& prefill_counts, unsigned jobs);

// Markdown: one table per level, and the highest level each configuration sustains within the
// SLOs (TTFT p90 <= slo_ttft_s and ITL p90 <= slo_itl_s).
std::string render_pd_markdown(const PdReport& r);

// `cgn-bench sim --pd-prefill ...`: runs the comparison, prints the markdown (and writes it to
// out_md when set); the process exit code (2 for a split that leaves a pool empty).
int pd_main(const Workload& w, const ClusterConfig& c, const std::vector<double>& levels,
            const std::vector<uint32_t>& prefill_counts, unsigned jobs, const std::string& out_md);

}  // namespace cgn::bench
