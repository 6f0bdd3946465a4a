// cgn-bench-load: `cgn-bench load` (cgn-bench forwards that subcommand here, so that cgn-bench
// itself links no HTTP client). Flags in, bench_harness/load/load_cmd.h does the work.
#include "bench_harness/load/load_cmd.h"

int main(int argc, char** argv) {
  auto options = cgn::bench::parse_load_options(argc, argv);
  if (!options) {
    return cgn::print_cli_exit(options.error());
  }
  return cgn::bench::run_load_command(*options);
}
