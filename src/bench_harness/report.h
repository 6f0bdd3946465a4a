// Runs every policy of a workload at the fixed load levels and renders the result as markdown
// and JSON (the numbers of docs/benchmarks.md and bench/results/).
//
// Thread safety: run_workload() may use `jobs` threads internally (each run owns its engines
// and routing core); the functions themselves are reentrant.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_harness/cluster_sim.h"
#include "routing/policies.h"

namespace cgn::bench {

struct SuiteOptions {
  // Levels of offered round_robin utilisation. The headline level is reported in full; every
  // level feeds the throughput figure.
  std::vector<double> levels = {0.5, 0.85, 1.0};
  double headline = 0.85;
  std::vector<const routing::Policy*> policies = {
      routing::builtin_policy("kv"), routing::builtin_policy("round_robin"),
      routing::builtin_policy("random"), routing::builtin_policy("least_load"),
      routing::builtin_policy("session")};
  unsigned jobs = 1;  // runs in parallel (each run is single-threaded and deterministic)
};

struct LevelReport {
  LoadLevel level;
  std::vector<PolicyResult> policies;  // in SuiteOptions::policies order
};

struct WorkloadReport {
  std::string workload;
  uint32_t nodes = 0;
  size_t requests = 0;
  double mean_input_tokens = 0;
  double mean_output_tokens = 0;
  double ideal_hit_rate = 0;
  // TTFT floor (IdealBound): idle node holding the ideal prefix; no policy can beat it.
  double floor_ttft_p50_s = 0;
  double floor_ttft_p90_s = 0;
  std::vector<LevelReport> levels;  // SuiteOptions::levels order
  size_t headline_index = 0;
  // Per policy: the highest swept arrival rate (req/s) at which TTFT p90 <= 2 s (0 = none).
  std::vector<double> throughput_rps;
};

WorkloadReport run_workload(const Workload& w, const ClusterConfig& c, const SuiteOptions& o);

// The result of one policy at the headline level (nullptr when absent).
const PolicyResult* find_policy(const WorkloadReport& r, std::string_view policy);

std::string render_markdown(const WorkloadReport& r);
// Whitespace-separated tables for gnuplot (bench/plots.gp): `prefix`-headline.dat holds one row
// per policy at the headline level, `prefix`-sweep.dat one block per policy (blocks separated
// by two blank lines, gnuplot's `index`) with one row per level. Returns false on an I/O error.
bool write_plot_data(const WorkloadReport& r, const std::string& prefix);
nlohmann::json to_json(const WorkloadReport& r);

}  // namespace cgn::bench
