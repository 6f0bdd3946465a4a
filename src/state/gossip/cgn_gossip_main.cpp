// cgn-gossip: one gossip member on its own, for tests, demos and debugging a cluster. Thin main
// over state/gossip/member_app.h, which describes the flags and the status file.
#include "core/log.h"
#include "core/sd_notify.h"
#include "core/signals.h"
#include "core/version.h"
#include "state/gossip/member_app.h"

int main(int argc, char** argv) {
  if (auto v = cgn::print_version_if_asked(argc, argv, "cgn-gossip")) {
    return *v;
  }
  auto options = cgn::gossip::parse_member_options(argc, argv);
  if (!options) {
    return cgn::print_cli_exit(options.error());
  }
  cgn::log::set_level(options->log_level);
  const cgn::ShutdownSignals signals;  // before any thread starts
  cgn::gossip::MemberApp app(std::move(*options));
  if (auto port = app.start(); !port) {
    return cgn::print_cli_exit(port.error());
  }
  cgn::sd::notify_ready("gossip");
  signals.wait();
  cgn::sd::notify_stopping("gossip");
  app.stop();
  return 0;
}
