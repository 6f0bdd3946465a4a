// cgn-bench: benchmark tools. `cgn-bench sim` is the deterministic cluster simulator
// (docs/benchmarks.md); `cgn-bench load` runs cgn-bench-load. Thin main over sim_cmd.h.
#include "bench_harness/sim_cmd.h"

int main(int argc, char** argv) {
  auto cmd = cgn::bench::parse_bench_options(argc, argv);
  if (!cmd) {
    return cgn::print_cli_exit(cmd.error());
  }
  if (cmd->load) {
    return cgn::bench::exec_load_command(argv[0], cmd->load_args);
  }
  return cgn::bench::run_sim_command(cmd->sim);
}
