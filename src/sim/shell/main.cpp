// cgn-engine-sim: options (sim/shell/options.h) -> SimApp (sim/shell/app.h) -> SIGTERM/SIGINT ->
// stop. docs/sim.md describes the flags and the three ways to start it.
#include "core/signals.h"
#include "sim/shell/app.h"
#include "sim/shell/options.h"

int main(int argc, char** argv) {
  auto setup = cgn::sim::parse_sim_options(argc, argv);
  if (!setup) {
    return cgn::print_cli_exit(setup.error());
  }
  const cgn::ShutdownSignals signals;  // before any thread starts
  cgn::sim::SimApp app(std::move(*setup));
  if (auto port = app.start(); !port) {
    return cgn::print_cli_exit(port.error());
  }
  signals.wait();
  app.stop(cgn::SteadyClock::instance().now() + cgn::sim::kStopGrace);
  return 0;
}
