// `cgn-bench load` (the cgn-bench-load binary; cgn-bench forwards its `load` subcommand here):
// the command line parsed into LoadCommandOptions, then run_load_command() replays the workload
// against each target (load_gen.h) and writes the reports (docs/benchmarks-live.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cli_exit.h"

namespace cgn::bench {

struct LoadCommandOptions {
  std::string workload = "small";
  std::string trace;
  size_t limit = 0;
  uint64_t seed = 1;
  std::vector<std::string> targets;
  uint32_t nodes = 0;
  double level = 0;
  double time_scale = 0;
  double rate = 0;
  double engine_time_scale = 1.0;
  double duration = 0;
  double drain = 120;
  std::string model = "meta-llama/Llama-3.1-8B-Instruct";
  bool no_session = false;
  std::string out_md;
  std::string out_json;
  std::string out_records;
  std::string log_level = "warn";
};

// argv as main receives it; argv[0] names the command in the usage text ("cgn-bench load" when
// forwarded). --help: status 0 and the help text; a bad flag or value: CLI11's status and message.
CliResult<LoadCommandOptions> parse_load_options(int argc, const char* const* argv);

// Runs the command: progress on stderr, the markdown report on stdout, --md/--json/--records
// files. Returns the exit status (0, 1: the trace could not be read, 2: bad options or a failed
// target).
int run_load_command(const LoadCommandOptions& f);

}  // namespace cgn::bench
