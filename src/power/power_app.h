// cgn-power as one application object (docs/design/lifecycle.md): parsed options in (PowerSetup),
// start() / stop(deadline) out; main only adds the shutdown signals.
//
// start() builds every configured source (an unknown kind or a bad URL stops it there, named),
// starts the Reader's polling thread, then HTTP /metrics and the gRPC service Power, and writes
// the port files. A source that cannot read (no library, EACCES, BMC down) does not stop the
// daemon: it is down, logged once, absent from the readings. stop() stops them in reverse.
//
// Threads: the Reader's poll thread, the HTTP worker, gRPC's threads; all joined by stop(). The
// object is driven from one thread (main, or a test).
#pragma once

#include <cstdint>
#include <memory>

#include "core/cli_exit.h"
#include "core/clock.h"
#include "power/power_options.h"

namespace cgn::metrics {
class Registry;
}
namespace cgn::http {
class Server;
}

namespace cgn::power {

class Reader;
class PowerMetrics;
class PowerGrpcServer;

class PowerApp {
 public:
  explicit PowerApp(PowerSetup setup, const Clock& clock = SteadyClock::instance());
  ~PowerApp();  // stop(now)
  PowerApp(const PowerApp&) = delete;
  PowerApp& operator=(const PowerApp&) = delete;

  // Returns once every listener serves; on failure status 2 and a message naming the cause, with
  // nothing left running. Call once.
  CliResult<Ok> start();
  void stop(Nanos deadline);  // idempotent; a no-op before start()

  Nanos shutdown_deadline() const;  // clock now + 5 s
  uint16_t grpc_port() const;
  uint16_t metrics_port() const;

 private:
  CliResult<Ok> start_listeners();

  PowerSetup setup_;
  const Clock& clock_;
  bool started_ = false;
  bool stopped_ = false;
  // Declared in start order; stop() stops them in reverse.
  std::unique_ptr<Reader> reader_;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<PowerMetrics> metrics_;
  std::unique_ptr<http::Server> http_;
  std::unique_ptr<PowerGrpcServer> grpc_;
};

}  // namespace cgn::power
