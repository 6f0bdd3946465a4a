// cgn-kvcached: options (kvcached/kvcached_options.h) -> --print-config, or KvcachedApp
// (kvcached/kvcached_app.h: the block store, gRPC KvCache, the local fast path, /metrics) ->
// READY=1 -> SIGTERM/SIGINT -> STOPPING=1 -> stop (core/daemon/daemon.h). docs/kvcached.md
// describes the daemon.
#include "core/daemon/daemon.h"
#include "kvcached/kvcached_app.h"

int main(int argc, char** argv) {
  // A SIGTERM while a large RAM arena is allocated ends the start there (status 0).
  return cgn::daemon::run<cgn::kvcached::KvcachedApp>(
      argc, argv, "cgn-kvcached", cgn::kvcached::parse_kvcached_options,
      [](cgn::kvcached::KvcachedApp& app, const cgn::ShutdownSignals& signals) {
        return app.start([&signals] { return signals.pending(); });
      });
}
