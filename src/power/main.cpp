// cgn-power: options (power/power_options.h) -> --print-config, or PowerApp (power/power_app.h: the
// sources, the Reader, gRPC Power, /metrics) -> READY=1 -> SIGTERM/SIGINT -> STOPPING=1 -> stop
// (core/daemon/daemon.h). docs/power.md describes it.
#include "core/daemon/daemon.h"
#include "power/power_app.h"

int main(int argc, char** argv) {
  return cgn::daemon::run<cgn::power::PowerApp>(
      argc, argv, "cgn-power", cgn::power::parse_power_options,
      [](cgn::power::PowerApp& app, const cgn::ShutdownSignals&) { return app.start(); });
}
