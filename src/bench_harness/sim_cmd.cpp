// `cgn-bench sim`: flags in, the bench_harness library does the work (docs/benchmarks.md).
#include "bench_harness/sim_cmd.h"

#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench_harness/cluster_sim_pd.h"
#include "bench_harness/report.h"
#include "bench_harness/tier_compare.h"
#include "core/cli_parse.h"

namespace cgn::bench {
namespace {

// "kv,random" -> the registered policies, in order; the error names the first unknown one and
// lists the registered names.
Result<std::vector<const routing::Policy*>, routing::PolicyError> parse_policies(const std::string& list) {
  std::vector<const routing::Policy*> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) {
      end = list.size();
    }
    auto p = routing::find_policy(std::string_view(list).substr(pos, end - pos));
    if (!p) {
      return p.error();
    }
    out.push_back(*p);
    pos = end + 1;
  }
  return out;
}

void add_sim_flags(CLI::App* sim, SimCommandOptions& o) {
  sim->add_option("-w,--workload", o.workload,
                  "conversation | synthetic (Mooncake traces) | llmd | small (shared-prefix presets)");
  sim->add_option("--trace", o.trace, "a Mooncake trace file (overrides the workload's default path)");
  sim->add_option("-n,--nodes", o.nodes,
                  "simulated engines (default 16 for traces, 8 for presets, 4 with --quick)");
  sim->add_option("--limit", o.limit, "replay only the first N requests (0 = all)");
  sim->add_option("--sessions", o.sessions,
                  "all | even | odd: the held-out split (sessions numbered by first request; "
                  "defaults are tuned on even, reported on odd)");
  sim->add_option("--seed", o.seed, "routing RNG and synthetic workload seed");
  sim->add_option("-j,--jobs", o.jobs, "runs in parallel (results do not depend on it)");
  sim->add_option("--levels", o.levels, "round_robin-equivalent utilisations (default 0.5 0.85 1.0)");
  sim->add_option("--headline", o.headline, "the level reported against the targets");
  sim->add_option("--policies", o.policies, "comma-separated policies");
  sim->add_flag("--quick", o.quick, "the first 300 conversation requests on 4 nodes, level 0.85 only");
  sim->add_flag("--no-load-guard", o.no_guard, "diagnosis only: disable the routing load guard");
  sim->add_flag("--guard-counts-running", o.guard_running,
                "diagnosis only: the load guard's spread rule counts decoding requests (the former rule)");
  sim->add_option("--prefill-rate", o.prefill_rate,
                  "diagnosis only: the score's prefill_tokens_per_s (default: the routing default)");
  sim->add_option("--uncached-weight", o.uncached_weight,
                  "diagnosis only: the score's uncached_weight (default: the routing default)");
  sim->add_flag("--diagnose", o.diagnose, "attribute lost prefix hits per cause (slower; same decisions)");
  sim->add_option("--md", o.out_md, "write the markdown report here");
  sim->add_option("--json", o.out_json, "write the JSON report here");
  sim->add_option("--plot-data", o.plot_data, "write gnuplot tables PREFIX-headline.dat, PREFIX-sweep.dat");
  sim->add_option("--pd-prefill", o.pd_prefill,
                  "aggregated vs disaggregated (cluster_sim_pd.h): prefill node counts to compare, "
                  "the rest of the nodes decode (e.g. 2 3 4)");
  sim->add_flag(
      "--tiers", o.tiers,
      "KV offload tiers: kv, kv+tiers, round_robin+tiers and disagg-cgn per level (tier_compare.h)");
  sim->add_option("--tier-ram-blocks", o.tier_ram_blocks, "--tiers: RAM tier per node, in KV blocks")
      ->check(CLI::Range(1u, 1u << 24));
  sim->add_option("--tier-ssd-blocks", o.tier_ssd_blocks,
                  "--tiers: SSD tier per node, in KV blocks (0: none)")
      ->check(CLI::Range(0u, 1u << 24));
  sim->add_option("--tier-pd-prefill", o.tier_pd_prefill,
                  "--tiers: disagg-cgn's prefill nodes (0: no such row)");
}

Error<int> fail(int status, const std::string& msg) {
  return cli_exit(status, "cgn-bench: " + msg + "\n");
}

// The workload named by -w/--trace, cut to --sessions and --limit; picks the default node count.
CliResult<Workload> sim_workload(const SimCommandOptions& o, uint32_t& nodes, size_t limit) {
  Workload w;
  if (o.workload == "conversation" || o.workload == "synthetic" || !o.trace.empty()) {
    const std::string path = o.trace.empty() ? trace_path(o.workload) : o.trace;
    auto loaded = load_mooncake_trace(path);
    if (!loaded.ok()) {
      return fail(1, loaded.error().message);
    }
    w = std::move(*loaded);
    nodes = nodes == 0 ? 16 : nodes;
  } else {
    auto preset = shared_prefix_preset(o.workload);
    if (!preset.ok()) {
      return fail(2, preset.error().message);
    }
    w = make_shared_prefix(*preset, o.seed);
    nodes = nodes == 0 ? 8 : nodes;
  }
  const auto half = parse_session_half(o.sessions);
  if (!half.ok()) {
    return fail(2, "--sessions: " + half.error().message);
  }
  return take_first(session_half(w, *half), limit);
}

ClusterConfig cluster_config(const SimCommandOptions& o, uint32_t nodes) {
  ClusterConfig cc;
  cc.nodes = nodes;
  cc.seed = o.seed;
  cc.diagnose = o.diagnose;
  if (o.no_guard) {
    cc.routing.guard.enabled = false;
  }
  cc.routing.guard.spread_counts_running = o.guard_running;
  if (o.prefill_rate > 0) {
    cc.routing.weights.prefill_tokens_per_s = o.prefill_rate;
  }
  if (o.uncached_weight > 0) {
    cc.routing.weights.uncached_weight = o.uncached_weight;
  }
  return cc;
}

bool is_diagnostic(const SimCommandOptions& o) {
  return o.no_guard || o.guard_running || o.prefill_rate > 0 || o.uncached_weight > 0;
}

std::string sim_markdown(const SimCommandOptions& o, const WorkloadReport& r) {
  std::string md = render_markdown(r);
  if (is_diagnostic(o)) {
    md = "> **Diagnostic run: routing defaults changed (" +
         std::string(o.no_guard ? "load guard off; " : "") +
         (o.guard_running ? "spread rule counts decoding requests; " : "") +
         (o.prefill_rate > 0 ? "prefill_tokens_per_s " + std::to_string(o.prefill_rate) + "; "
                             : std::string()) +
         (o.uncached_weight > 0 ? "uncached_weight " + std::to_string(o.uncached_weight) : std::string()) +
         "). Not the benchmark.**\n\n" + md;
  }
  return md;
}

// CPU time (user + sys, every thread) next to wall: on a shared host only the former is stable.
void print_timing(size_t runs, double wall) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  std::fprintf(stderr, "cgn-bench: %zu runs in %.1f s wall, %.1f s cpu\n", runs, wall, cpu);
}

CliResult<Ok> write_sim_outputs(const SimCommandOptions& o, const ClusterConfig& cc, const WorkloadReport& r,
                                const std::string& md) {
  if (!o.out_md.empty()) {
    std::ofstream(o.out_md) << md;
  }
  if (!o.plot_data.empty() && !write_plot_data(r, o.plot_data)) {
    return fail(1, "cannot write " + o.plot_data + "-*.dat");
  }
  if (!o.out_json.empty()) {
    auto j = to_json(r);
    j["routing_defaults"] = !is_diagnostic(o);
    j["sessions"] = o.sessions;
    j["weights"] = {{"prefill_tokens_per_s", cc.routing.weights.prefill_tokens_per_s},
                    {"uncached_weight", cc.routing.weights.uncached_weight}};
    std::ofstream(o.out_json) << j.dump(2) << "\n";
  }
  return Ok{};
}

CliResult<int> run_sim_steps(const SimCommandOptions& o) {
  SuiteOptions so;
  auto policies = parse_policies(o.policies);
  if (!policies) {
    return fail(2, "bad --policies '" + o.policies + "': " + policies.error().message);
  }
  so.policies = std::move(*policies);
  so.jobs = o.jobs;
  so.headline = o.headline;
  size_t limit = o.limit;
  uint32_t nodes = o.nodes;
  if (o.quick) {
    limit = limit == 0 ? 300 : limit;
    nodes = nodes == 0 ? 4 : nodes;
    so.levels = {o.headline};
  } else if (!o.levels.empty()) {
    so.levels = o.levels;
  }
  auto w = sim_workload(o, nodes, limit);
  if (!w) {
    return w.error();
  }
  const ClusterConfig cc = cluster_config(o, nodes);
  if (!o.pd_prefill.empty()) {
    return pd_main(*w, cc, so.levels, o.pd_prefill, o.jobs, o.out_md);
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (o.tiers) {
    ClusterConfig tc = cc;
    tc.tiers = TierConfig{o.tier_ram_blocks, o.tier_ssd_blocks};
    const std::string md =
        render_tier_markdown(run_tier_comparison(*w, tc, so.levels, o.tier_pd_prefill), tc);
    std::cout << md;
    print_timing(so.levels.size() * 4,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!o.out_md.empty()) {
      std::ofstream(o.out_md) << md;
    }
    return 0;
  }
  const WorkloadReport r = run_workload(*w, cc, so);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string md = sim_markdown(o, r);
  std::cout << md;
  print_timing(so.levels.size() * so.policies.size(), wall);
  if (auto written = write_sim_outputs(o, cc, r, md); !written) {
    return written.error();
  }
  return 0;
}

}  // namespace

CliResult<BenchCommand> parse_bench_options(int argc, const char* const* argv) {
  BenchCommand cmd;
  CLI::App app{"cgn-bench: Cognitora benchmarks"};
  app.require_subcommand(1);
  auto* sim = app.add_subcommand("sim", "deterministic cluster simulation in virtual time");
  add_sim_flags(sim, cmd.sim);
  // `load` takes everything after it as is: cgn-bench-load parses it (its own --help included).
  auto* load =
      app.add_subcommand("load", "live load generator: replay a workload over HTTP against a router");
  load->set_help_flag();
  load->prefix_command();
  if (auto parsed = parse_command_line(app, argc, argv); !parsed) {
    return parsed.error();
  }
  if (load->parsed()) {
    cmd.load = true;
    cmd.load_args = load->remaining();
  }
  return cmd;
}

int run_sim_command(const SimCommandOptions& o) {
  auto r = run_sim_steps(o);
  return r ? *r : print_cli_exit(r.error());
}

int exec_load_command(const char* argv0, const std::vector<std::string>& args) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string path = (ec ? std::filesystem::path(argv0) : self).parent_path() / "cgn-bench-load";
  std::vector<std::string> words{std::string(argv0) + " load"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) {
    argv.push_back(w.data());
  }
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  std::fprintf(stderr, "cgn-bench: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
  return 127;
}

}  // namespace cgn::bench
