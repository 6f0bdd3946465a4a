// cgn-bench's command line: `cgn-bench sim` (the deterministic cluster simulator, run here) and
// `cgn-bench load` (the live load generator, forwarded to the cgn-bench-load binary next to this
// one, so that cgn-bench links no HTTP client). docs/benchmarks.md describes the flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cli_exit.h"

namespace cgn::bench {

struct SimCommandOptions {
  std::string workload = "conversation";
  std::string trace;
  uint32_t nodes = 0;
  size_t limit = 0;
  std::string sessions = "all";
  uint64_t seed = 1;
  unsigned jobs = 1;
  std::vector<double> levels;
  double headline = 0.85;
  std::string policies = "kv,round_robin,random,least_load,session";
  bool quick = false;
  bool no_guard = false;
  bool guard_running = false;
  double prefill_rate = 0;
  double uncached_weight = 0;
  bool diagnose = false;
  std::string out_md;
  std::string out_json;
  std::string plot_data;
  std::vector<uint32_t> pd_prefill;
  bool tiers = false;                 // the KV offload tier comparison (tier_compare.h)
  uint32_t tier_ram_blocks = 27'500;  // per node
  uint32_t tier_ssd_blocks = 55'000;
  uint32_t tier_pd_prefill = 4;  // disagg-cgn's prefill nodes (0: no disagg-cgn row)
};

struct BenchCommand {
  bool load = false;                   // `cgn-bench load ARGS`: forward ARGS
  std::vector<std::string> load_args;  // what followed `load`
  SimCommandOptions sim;               // `cgn-bench sim`
};

// argv as main receives it. --help: status 0 and the help text; a bad flag or value (or no
// subcommand): CLI11's status and message.
CliResult<BenchCommand> parse_bench_options(int argc, const char* const* argv);

// Runs `cgn-bench sim`: the report on stdout (and --md, --json, --plot-data), timing on stderr.
// Returns the exit status (0; 1: a trace could not be read or written; 2: bad options).
int run_sim_command(const SimCommandOptions& o);

// Replaces this process with cgn-bench-load from the directory of the running executable,
// argv[0] "ARGV0 load" (what its usage text names). Returns only on failure: status 127 and the
// reason on stderr.
int exec_load_command(const char* argv0, const std::vector<std::string>& args);

}  // namespace cgn::bench
