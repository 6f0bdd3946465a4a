// The deterministic cluster simulator (`cgn-bench sim`): replays a workload in
// virtual time against N simulated engines (sim::Engine, the default node model unchanged),
// with the routing core (routing::RoutingCore) making every decision on the same digests,
// index, score and load guard as the gateway. Node state reaches the router the way it does
// live: every scrape_interval each engine's vLLM /metrics text is rendered
// (sim::render_metrics), parsed by the router's scraper (routing::scrape_engine_metrics) and
// applied as a NodeUpdate, so between scrapes the router sees stale load, exactly as live.
// The router records dispatch, first token and completion as the gateway does.
//
// No sockets, no wall clock, no threads: the same inputs give the same numbers.
//
// Thread safety: every function is reentrant; runs share nothing, so callers may run
// policies on several threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_harness/cluster_sim_tiers.h"
#include "bench_harness/workload.h"
#include "routing/policies.h"
#include "sim/node_model.h"

namespace cgn::bench {

struct ClusterConfig {
  uint32_t nodes = 16;
  sim::NodeModel node_model = sim::default_node_model();
  std::string model_name = "meta-llama/Llama-3.1-8B-Instruct";
  // The live router polls each engine's /metrics every second; node i's polls are offset by
  // i/N of the interval (independent timers).
  Nanos scrape_interval = kNanosPerSecond;
  uint64_t seed = 1;  // the routing core's RNG (random policy, ties)
  // The routing policy every run starts from (its kind is set per run). The documented defaults
  // are the benchmark; changing them is for diagnosis only and the report says so.
  routing::RoutingPolicy routing;
  // SLO used for goodput.
  double slo_ttft_s = 2.0;
  double slo_itl_s = 0.1;
  // Diagnosis: at every dispatch, ask every engine how much of the prompt it holds and
  // attribute the hit tokens the chosen node lacks (PolicyResult::diagnosis). Slower (one
  // prefix lookup per engine per request); does not change any decision.
  bool diagnose = false;
  // KV offload tiers per node (cluster_sim_tiers.h); off by default. With tier_credit, at every
  // dispatch the chosen node's tier residency of the prompt beyond its HBM hit is confirmed to
  // the routing core at its tier (what the live agent publishes from its kvcached's lookup).
  TierConfig tiers;
  bool tier_credit = true;
};

// Where the prefix hits went (ClusterConfig::diagnose). Token sums over dispatched requests.
// "best" is the longest cached prefix any engine held at dispatch time, "chosen" the chosen
// engine's; the gap (best - chosen) is split by the first cause that applies:
//   guard   the best node was removed by the load guard;
//   stale   the router believed the chosen node held more than it did (optimistic entries the
//           engine had evicted, or never stored);
//   blind   the router believed the best node held less than it did;
//   score   the router knew, and the estimate preferred a less-loaded node.
struct Diagnosis {
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t best_tokens = 0;      // sum of max over nodes of the engine-held prefix (hit-capped)
  uint64_t chosen_tokens = 0;    // the chosen engine's held prefix at dispatch
  uint64_t reported_tokens = 0;  // engine-reported cached tokens (usage), the hit rate's numerator
  uint64_t lost_guard = 0, lost_stale = 0, lost_blind = 0, lost_score = 0;
  uint64_t n_guard = 0, n_stale = 0, n_blind = 0, n_score = 0;  // requests per cause
  uint64_t believed_chosen_tokens = 0;  // the router's overlap (tokens) for the chosen node
  uint64_t overbelief_tokens = 0;       // sum over requests of max(0, believed - held), chosen node
  uint64_t cold_requests = 0;           // every engine held the same prefix: no affinity to follow
  std::vector<uint64_t> cold_per_node;  // where the new prefixes went
};

// A workload at one load level: arrivals already scaled.
struct LoadLevel {
  double utilisation = 0.85;  // offered round_robin utilisation (see offered_demand_s)
  double time_scale = 1.0;    // arrival = trace arrival * time_scale
  double rate_rps = 0;        // resulting mean arrival rate
};

// The modelled service demand of one request on an idle node with no prefix caching (seconds):
// its chunked prefill (NodeModel::idle_ttft with nothing cached) plus the marginal cost of its
// decode steps in a batch (per token: decode_ns_per_seq + context * decode_attention), with
// the step overhead of decode steps left out (it is shared by the batch).
double request_demand_s(const sim::NodeModel& m, uint32_t input_tokens, uint32_t output_tokens);
// Sum over the workload.
double offered_demand_s(const Workload& w, const sim::NodeModel& m);

// The load level at which the offered demand fills `utilisation` of the cluster over the
// workload's (rescaled) span: time_scale = sum(demand) / (utilisation * nodes * span).
LoadLevel load_level(const Workload& w, const ClusterConfig& c, double utilisation);

struct PolicyResult {
  std::string policy;  // "kv", "round_robin", ...
  uint64_t requests = 0;
  uint64_t completed = 0;
  uint64_t errors = 0;  // the engine refused the request or failed it
  uint64_t shed = 0;    // the router found no eligible node (load guard)
  double ttft_p50_s = 0, ttft_p90_s = 0, ttft_p99_s = 0, ttft_mean_s = 0;
  double itl_p50_s = 0, itl_p90_s = 0, itl_mean_s = 0;  // per request mean inter-token latency
  double e2e_p50_s = 0;
  double makespan_s = 0;    // first arrival to last completion
  double goodput_rps = 0;   // completions meeting both SLOs per second of makespan
  double output_tok_s = 0;  // generated tokens per second of makespan
  double hit_rate = 0;      // sum(engine-reported cached tokens) / sum(prompt tokens), served requests
  double busy_mean_s = 0;   // mean over nodes of the time spent in steps
  double busy_max_s = 0;
  double imbalance = 0;    // busy_max / busy_mean
  double utilisation = 0;  // busy_mean / makespan
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;      // HBM hits + tier loads + P/D transfers
  uint64_t loaded_ram_tokens = 0;  // of cached_tokens: loaded from the RAM tier
  uint64_t loaded_ssd_tokens = 0;  // of cached_tokens: loaded from the SSD tier
  uint64_t guarded_out = 0;        // decisions where the load guard removed at least one node
  std::vector<uint64_t> per_node_requests;
  // Modelled energy (the node model's power figures, not a measurement): all engines over the
  // makespan, idle time included.
  double energy_j = 0;
  double j_per_token = 0;    // per output token
  double j_per_request = 0;  // per completed request
  Diagnosis diagnosis;       // filled when ClusterConfig::diagnose
};

// Runs one policy over the workload at the level; deterministic.
PolicyResult run_policy(const Workload& w, const LoadLevel& level, const routing::Policy* policy,
                        const ClusterConfig& c);

// The bound: one ideal node holding the whole cluster's KV (nodes * num_gpu_blocks blocks of
// the node model, vLLM prefix caching with LRU eviction) replaying every prompt in arrival
// order, one at a time. Returns hit tokens / prompt tokens, counting requests that fit the
// model's context like the engines do.
double ideal_hit_rate(const Workload& w, const ClusterConfig& c);

// The ideal node's hit rate and the TTFT floor it implies: per request, the TTFT on an idle node
// already holding the prefix the ideal node held (NodeModel::idle_ttft(prompt, ideal hit), pure
// chunked prefill of what even the ideal node misses, no queueing). No routing policy can beat
// the floor's percentiles, so round_robin's p50 over the floor's p50 bounds the p50 gain any
// routing can show on the trace.
struct IdealBound {
  double hit_rate = 0;
  double floor_ttft_p50_s = 0;
  double floor_ttft_p90_s = 0;
};
IdealBound ideal_bound(const Workload& w, const ClusterConfig& c);

}  // namespace cgn::bench
