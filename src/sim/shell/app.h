// cgn-engine-sim as one application object (docs/design/lifecycle.md): options in (SimSetup,
// sim/shell/options.h), start() / stop(deadline) out; main only adds the shutdown signals.
//
// Threads: start() starts the SimServer, which owns every thread of the process (the HTTP worker
// that runs the engine, the delayed-listen loader, the `refuse` fault's acceptor, the KV event
// publisher) and joins them in stop(). The object is driven from one thread (main).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "core/cli_exit.h"
#include "core/clock.h"
#include "sim/shell/options.h"
#include "sim/shell/server.h"

namespace cgn::sim {

// How long main lets in-flight requests finish after SIGTERM/SIGINT.
inline constexpr Nanos kStopGrace = 5 * kNanosPerSecond;

class SimApp {
 public:
  // `clock` is read by stop() to turn its deadline into a grace period.
  explicit SimApp(SimSetup setup, const Clock& clock = SteadyClock::instance());
  ~SimApp();  // stop(now + kStopGrace) when still running
  SimApp(const SimApp&) = delete;
  SimApp& operator=(const SimApp&) = delete;

  // Sets the log level, starts the server (port reserved at once; see SimServer::start) and
  // writes the port file (PORT\n via F.tmp + rename). On failure: the exit status (1: the server
  // could not start, 2: the port file could not be written) and the message; nothing is left
  // running. Call once.
  CliResult<uint16_t> start();
  // Stops listening, lets in-flight requests finish until `deadline` (clock time), joins every
  // thread. Idempotent; a no-op before start().
  void stop(Nanos deadline);

  uint16_t port() const { return port_; }

 private:
  CliResult<Ok> write_port_file() const;

  SimSetup setup_;
  const Clock& clock_;
  std::unique_ptr<SimServer> server_;
  uint16_t port_ = 0;
};

}  // namespace cgn::sim
