// cgn-router: flags and configuration (router_app.h) -> RouterApp -> signals. SIGTERM/SIGINT stop
// with the configured grace; SIGHUP reloads the routing policy and weights from --config.
#include "core/signals.h"
#include "router/router_app.h"

#ifndef CGN_SOURCE_DASHBOARD_DIR
#define CGN_SOURCE_DASHBOARD_DIR ""
#endif

int main(int argc, char** argv) {
  auto setup = cgn::router::parse_router_command(argc, argv, CGN_SOURCE_DASHBOARD_DIR);
  if (!setup) {
    return cgn::print_cli_exit(setup.error());
  }
  const cgn::ShutdownSignals signals;  // SIGTERM, SIGINT: before any thread starts
  cgn::router::HangupSignal hangup;    // SIGHUP: likewise
  cgn::router::RouterApp app(std::move(*setup));
  if (auto port = app.start(); !port) {
    return cgn::print_cli_exit(port.error());
  }
  if (auto reloads = hangup.start([&app] { (void)app.reload(); }); !reloads) {
    return cgn::print_cli_exit(reloads.error());  // app's destructor stops it
  }
  signals.wait();
  hangup.stop();
  app.stop(app.shutdown_deadline());
  return 0;
}
