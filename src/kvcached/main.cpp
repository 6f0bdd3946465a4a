// cgn-kvcached: options (kvcached/kvcached_options.h) -> --print-config, or KvcachedApp
// (kvcached/kvcached_app.h: the block store, gRPC KvCache, the local fast path, /metrics) ->
// SIGTERM/SIGINT -> stop. docs/kvcached.md describes the daemon.
#include "core/log.h"
#include "core/signals.h"
#include "kvcached/kvcached_app.h"

int main(int argc, char** argv) {
  auto setup = cgn::kvcached::parse_kvcached_options(argc, argv);
  if (!setup) {
    return cgn::print_cli_exit(setup.error());
  }
  if (auto printed = cgn::kvcached::kvcached_print_mode(*setup)) {
    return cgn::print_cli_exit(*printed);
  }
  const cgn::ShutdownSignals signals;  // before any thread starts
  cgn::kvcached::KvcachedApp app(std::move(*setup));
  if (auto started = app.start(); !started) {
    return cgn::print_cli_exit(started.error());
  }
  const int sig = signals.wait();
  CGN_LOG_INFO(cgn::log::get("kvcached"), "stopping", cgn::log::kv("signal", sig));
  app.stop(app.shutdown_deadline());
  return 0;
}
