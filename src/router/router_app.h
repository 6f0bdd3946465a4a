// cgn-router as one application object (docs/design/lifecycle.md): parsed options in
// (RouterSetup, options.h), start() / stop(deadline) / reload() out; main.cpp only adds the
// signals (core/signals.h: ShutdownSignals for SIGTERM/SIGINT, HangupSignal for SIGHUP).
//
// What it runs, in start order: the log configuration, the API keys, the state backend
// (make_state_store, state_backend.h) and the Gateway over them (gateway.h), which owns every
// thread of the process: the server's workers, the [router.metrics] listener, the store's thread
// and the maintenance thread. stop() stops them in reverse: stop accepting, let in-flight
// requests finish until the deadline, stop the listeners' upstream clients, the state store, the
// maintenance thread (Gateway::stop). The object is driven from one thread (main, or a test).
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/cli_exit.h"
#include "core/clock.h"
#include "router/gateway.h"
#include "router/grpc_api/server.h"
#include "router/options.h"

namespace cgn::router {

// cgn-router's command line for main: the parsed setup, or what to print and the exit status
// (--help, --print-config: 0 with the text for stdout; a bad flag or configuration: 2 with
// "cgn-router: <why>" for stderr). `source_dashboard`: see parse_router_options.
CliResult<RouterSetup> parse_router_command(int argc, const char* const* argv,
                                            const std::string& source_dashboard);

class RouterApp {
 public:
  // `clock` is what stop()'s deadline is read against.
  explicit RouterApp(RouterSetup setup, const Clock& clock = SteadyClock::instance());
  ~RouterApp();  // stop(now): no grace when the owner did not stop it
  RouterApp(const RouterApp&) = delete;
  RouterApp& operator=(const RouterApp&) = delete;

  // Configures logging, loads the API keys, builds the state backend, starts the Gateway and
  // writes --port-file. Returns the bound port, or the exit status and "cgn-router: <why>\n":
  // 2 for the configuration (log file, keys, an unknown or unusable state backend, the port
  // file), 1 when the gateway cannot start (the port is in use, a TLS file is missing). After a
  // failure nothing is left running. Call once.
  CliResult<uint16_t> start();
  // Stops accepting, lets in-flight requests finish until `deadline` (on the clock), stops the
  // state store and joins every thread. Idempotent; a no-op before start() or after a failed one.
  void stop(Nanos deadline);
  // now + [router.timeouts] shutdown_grace_ms: the deadline main gives stop() on SIGTERM/SIGINT.
  Nanos shutdown_deadline() const;
  // SIGHUP: re-reads --config and applies its routing policy, weights and admission (logged
  // once). Without --config, or when the file does not load, nothing changes and the reason
  // comes back (and is logged).
  Status<OptionsError> reload();

  uint16_t port() const { return port_; }
  // The [router.grpc] listener's port; 0 when there is none.
  uint16_t grpc_port() const { return grpc_port_; }
  // The running gateway (introspection for tests); null before start() and after a failed one.
  Gateway* gateway() { return gateway_.get(); }

 private:
  RouterSetup setup_;
  const Clock& clock_;
  std::unique_ptr<Gateway> gateway_;
  // [router.grpc]: runs calls through gateway_'s HTTP pipeline; stopped before it.
  std::unique_ptr<grpc_api::GrpcApi> grpc_;
  uint16_t port_ = 0;
  uint16_t grpc_port_ = 0;
  bool stopped_ = false;
};

}  // namespace cgn::router
