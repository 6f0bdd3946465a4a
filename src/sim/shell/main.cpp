// cgn-engine-sim: options (sim/shell/options.h) -> SimApp (sim/shell/app.h) -> SIGTERM/SIGINT ->
// stop. docs/sim.md describes the flags and the three ways to start it.
#include "core/sd_notify.h"
#include "core/signals.h"
#include "core/version.h"
#include "sim/shell/app.h"
#include "sim/shell/options.h"

int main(int argc, char** argv) {
  if (auto v = cgn::print_version_if_asked(argc, argv, "cgn-engine-sim")) {
    return *v;
  }
  auto setup = cgn::sim::parse_sim_options(argc, argv);
  if (!setup) {
    return cgn::print_cli_exit(setup.error());
  }
  const cgn::ShutdownSignals signals;  // before any thread starts
  cgn::sim::SimApp app(std::move(*setup));
  if (auto port = app.start(); !port) {
    return cgn::print_cli_exit(port.error());
  }
  cgn::sd::notify_ready("sim");
  signals.wait();
  cgn::sd::notify_stopping("sim");
  app.stop(cgn::SteadyClock::instance().now() + cgn::sim::kStopGrace);
  return 0;
}
