// cgn-router: flags and configuration (router_app.h) -> RouterApp -> signals. SIGTERM/SIGINT stop
// with the configured grace; SIGHUP reloads the routing policy and weights from --config.
#include "core/sd_notify.h"
#include "core/signals.h"
#include "core/version.h"
#include "router/router_app.h"

#ifndef CGN_SOURCE_DASHBOARD_DIR
#define CGN_SOURCE_DASHBOARD_DIR ""
#endif

namespace {
// SIGHUP: the reload, framed for systemd (Type=notify) as RELOADING=1 ... READY=1.
void reload(cgn::router::RouterApp& app) {
  cgn::sd::notify_reloading("router");
  (void)app.reload();
  cgn::sd::notify_ready("router");
}
}  // namespace

int main(int argc, char** argv) {
  if (auto v = cgn::print_version_if_asked(argc, argv, "cgn-router")) {
    return *v;
  }
  auto setup = cgn::router::parse_router_command(argc, argv, CGN_SOURCE_DASHBOARD_DIR);
  if (!setup) {
    return cgn::print_cli_exit(setup.error());
  }
  const cgn::ShutdownSignals signals;  // SIGTERM, SIGINT: before any thread starts
  cgn::HangupSignal hangup;            // SIGHUP: likewise
  cgn::router::RouterApp app(std::move(*setup));
  if (auto port = app.start(); !port) {
    return cgn::print_cli_exit(port.error());
  }
  if (auto why = hangup.start([&app] { reload(app); })) {
    return cgn::print_cli_exit(cgn::cli_exit(1, "cgn-router: " + *why + "\n"));  // app's destructor stops it
  }
  cgn::sd::notify_ready("router");
  signals.wait();
  cgn::sd::notify_stopping("router");
  hangup.stop();
  app.stop(app.shutdown_deadline());
  return 0;
}
