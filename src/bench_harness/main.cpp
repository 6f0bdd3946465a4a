// cgn-bench: benchmark tools. `cgn-bench sim` is the deterministic cluster simulator
// (docs/benchmarks.md). Thin main: flags in, bench_harness library does the work.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench_harness/cluster_sim_pd.h"
#include "bench_harness/load_cmd.h"
#include "bench_harness/report.h"

namespace {

std::vector<cgn::routing::PolicyKind> parse_policies(const std::string& list, bool& ok) {
  std::vector<cgn::routing::PolicyKind> out;
  ok = true;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) {
      end = list.size();
    }
    auto k = cgn::routing::parse_policy_kind(std::string_view(list).substr(pos, end - pos));
    if (!k) {
      ok = false;
      return out;
    }
    out.push_back(*k);
    pos = end + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cgn-bench: Cognitora benchmarks"};
  app.require_subcommand(1);
  auto* sim = app.add_subcommand("sim", "deterministic cluster simulation in virtual time");
  std::string workload = "conversation";
  std::string trace;
  uint32_t nodes = 0;
  size_t limit = 0;
  uint64_t seed = 1;
  unsigned jobs = 1;
  bool quick = false;
  std::vector<double> levels;
  double headline = 0.85;
  std::string policies = "kv,round_robin,random,least_load,session";
  std::string out_md;
  std::string out_json;
  sim->add_option("-w,--workload", workload,
                  "conversation | synthetic (Mooncake traces) | llmd | small (shared-prefix presets)");
  sim->add_option("--trace", trace, "a Mooncake trace file (overrides the workload's default path)");
  sim->add_option("-n,--nodes", nodes,
                  "simulated engines (default 16 for traces, 8 for presets, 4 with --quick)");
  sim->add_option("--limit", limit, "replay only the first N requests (0 = all)");
  std::string sessions = "all";
  sim->add_option("--sessions", sessions,
                  "all | even | odd: the held-out split (sessions numbered by first request; "
                  "defaults are tuned on even, reported on odd)");
  sim->add_option("--seed", seed, "routing RNG and synthetic workload seed");
  sim->add_option("-j,--jobs", jobs, "runs in parallel (results do not depend on it)");
  sim->add_option("--levels", levels, "round_robin-equivalent utilisations (default 0.5 0.85 1.0)");
  sim->add_option("--headline", headline, "the level reported against the targets");
  sim->add_option("--policies", policies, "comma-separated policies");
  sim->add_flag("--quick", quick, "the first 300 conversation requests on 4 nodes, level 0.85 only");
  bool no_guard = false;
  double prefill_rate = 0;
  sim->add_flag("--no-load-guard", no_guard, "diagnosis only: disable the routing load guard");
  bool guard_running = false;
  sim->add_flag("--guard-counts-running", guard_running,
                "diagnosis only: the load guard's spread rule counts decoding requests (the former rule)");
  sim->add_option("--prefill-rate", prefill_rate,
                  "diagnosis only: the score's prefill_tokens_per_s (default: the routing default)");
  double uncached_weight = 0;
  sim->add_option("--uncached-weight", uncached_weight,
                  "diagnosis only: the score's uncached_weight (default: the routing default)");
  bool diagnose = false;
  sim->add_flag("--diagnose", diagnose, "attribute lost prefix hits per cause (slower; same decisions)");
  sim->add_option("--md", out_md, "write the markdown report here");
  sim->add_option("--json", out_json, "write the JSON report here");
  std::string plot_data;
  sim->add_option("--plot-data", plot_data, "write gnuplot tables PREFIX-headline.dat, PREFIX-sweep.dat");
  std::vector<uint32_t> pd_prefill;
  sim->add_option("--pd-prefill", pd_prefill,
                  "aggregated vs disaggregated (cluster_sim_pd.h): prefill node counts to compare, "
                  "the rest of the nodes decode (e.g. 2 3 4)");
  const auto load_cmd = cgn::bench::add_load_command(app);  // `cgn-bench load` (load_cmd_main.cpp)
  CLI11_PARSE(app, argc, argv);
  if (const int rc = load_cmd(); rc >= 0) {
    return rc;
  }

  bool ok = false;
  cgn::bench::SuiteOptions so;
  so.policies = parse_policies(policies, ok);
  if (!ok || so.policies.empty()) {
    std::fprintf(stderr, "cgn-bench: bad --policies '%s'\n", policies.c_str());
    return 2;
  }
  so.jobs = jobs;
  so.headline = headline;
  if (quick) {
    limit = limit == 0 ? 300 : limit;
    nodes = nodes == 0 ? 4 : nodes;
    so.levels = {headline};
  } else if (!levels.empty()) {
    so.levels = levels;
  }

  cgn::bench::Workload w;
  if (workload == "conversation" || workload == "synthetic" || !trace.empty()) {
    const std::string path = trace.empty() ? cgn::bench::trace_path(workload) : trace;
    auto loaded = cgn::bench::load_mooncake_trace(path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "cgn-bench: %s\n", loaded.error().message.c_str());
      return 1;
    }
    w = std::move(*loaded);
    nodes = nodes == 0 ? 16 : nodes;
  } else {
    auto preset = cgn::bench::shared_prefix_preset(workload);
    if (!preset.ok()) {
      std::fprintf(stderr, "cgn-bench: %s\n", preset.error().message.c_str());
      return 2;
    }
    w = cgn::bench::make_shared_prefix(*preset, seed);
    nodes = nodes == 0 ? 8 : nodes;
  }
  const auto half = cgn::bench::parse_session_half(sessions);
  if (!half.ok()) {
    std::fprintf(stderr, "cgn-bench: --sessions: %s\n", half.error().message.c_str());
    return 2;
  }
  w = cgn::bench::take_first(cgn::bench::session_half(w, *half), limit);

  cgn::bench::ClusterConfig cc;
  cc.nodes = nodes;
  cc.seed = seed;
  cc.diagnose = diagnose;
  if (no_guard) {
    cc.routing.guard.enabled = false;
  }
  cc.routing.guard.spread_counts_running = guard_running;
  if (prefill_rate > 0) {
    cc.routing.weights.prefill_tokens_per_s = prefill_rate;
  }
  if (uncached_weight > 0) {
    cc.routing.weights.uncached_weight = uncached_weight;
  }
  if (!pd_prefill.empty()) {
    return cgn::bench::pd_main(w, cc, so.levels, pd_prefill, jobs, out_md);
  }
  const bool diagnostic = no_guard || guard_running || prefill_rate > 0 || uncached_weight > 0;
  const auto t0 = std::chrono::steady_clock::now();
  const cgn::bench::WorkloadReport r = cgn::bench::run_workload(w, cc, so);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::string md = cgn::bench::render_markdown(r);
  if (diagnostic) {
    md = "> **Diagnostic run: routing defaults changed (" + std::string(no_guard ? "load guard off; " : "") +
         (guard_running ? "spread rule counts decoding requests; " : "") +
         (prefill_rate > 0 ? "prefill_tokens_per_s " + std::to_string(prefill_rate) + "; " : std::string()) +
         (uncached_weight > 0 ? "uncached_weight " + std::to_string(uncached_weight) : std::string()) +
         "). Not the benchmark.**\n\n" + md;
  }
  std::cout << md;
  // CPU time (user + sys, every thread) next to wall: on a shared host only the former is stable.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  std::fprintf(stderr, "cgn-bench: %zu runs in %.1f s wall, %.1f s cpu\n",
               so.levels.size() * so.policies.size(), wall, cpu);
  if (!out_md.empty()) {
    std::ofstream(out_md) << md;
  }
  if (!plot_data.empty() && !cgn::bench::write_plot_data(r, plot_data)) {
    std::fprintf(stderr, "cgn-bench: cannot write %s-*.dat\n", plot_data.c_str());
    return 1;
  }
  if (!out_json.empty()) {
    auto j = cgn::bench::to_json(r);
    j["routing_defaults"] = !diagnostic;
    j["sessions"] = sessions;
    j["weights"] = {{"prefill_tokens_per_s", cc.routing.weights.prefill_tokens_per_s},
                    {"uncached_weight", cc.routing.weights.uncached_weight}};
    std::ofstream(out_json) << j.dump(2) << "\n";
  }
  return 0;
}
