// What a daemon built as "options -> app object -> signals" shares (cgn-power, cgn-kvcached;
// docs/design/lifecycle.md): the command line every such daemon has (--config, --listen,
// --metrics-listen, the port files, --log-level, --print-config) around its own flags, the
// HTTP /metrics server and the port files its app starts, and the main around the app.
//
//   int main(int argc, char** argv) {
//     return cgn::daemon::run<App>(argc, argv, "cgn-x", parse_x_options,
//                                  [](App& app, const cgn::ShutdownSignals&) { return app.start(); });
//   }
//
// An App has App(DaemonSetup), a start (called through `start`), Nanos shutdown_deadline() and
// stop(Nanos deadline).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/cli_exit.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/sd_notify.h"
#include "core/signals.h"
#include "core/version.h"

namespace cgn::http {
class Server;
}

namespace cgn::daemon {

// What the common flags set; the daemon's own flags go straight into `config`.
struct DaemonSetup {
  config::CognitoraConfig config;
  std::string config_path;        // empty: every key at its default
  std::string log_level;          // --log-level over [log] level
  std::string port_file;          // --port-file: the bound gRPC port, once serving
  std::string metrics_port_file;  // --metrics-port-file: the bound /metrics port
  bool print_config = false;
};

// One daemon's part of the command line.
struct CommandLine {
  std::string name;         // "cgn-power": the prefix of every error
  std::string description;  // the help's first line
  std::string config_help;  // --config's help: the sections it reads
  std::string listen_help;  // --listen's help: the service it serves
  // The keys --listen and --metrics-listen override (the daemon's section's).
  std::function<std::pair<std::string*, std::string*>(config::CognitoraConfig&)> listen_keys;
  // Adds the daemon's own flags; the help lists them after --metrics-listen.
  std::function<void(CLI::App&)> add_flags;
  // Applies them over the loaded configuration, after --listen and --metrics-listen: nullopt, or
  // why not, naming the flag.
  std::function<std::optional<std::string>(const CLI::App&, config::CognitoraConfig&)> apply;
};

// --help: status 0 with the help text; a usage error: CLI11's status with the help; a bad value
// or a config error: status 2 with "<name>: " and the message naming the flag, or the file, line
// and key. No side effects.
CliResult<DaemonSetup> parse_options(const CommandLine& command_line, int argc, const char* const* argv);

// --print-config: status 0 with the effective configuration; nullopt when the daemon should run.
std::optional<Error<int>> print_mode(const DaemonSetup& setup);

// Status 2 with "<name>: <message>\n": how a daemon's start fails.
Error<int> failure(std::string_view name, std::string_view message);

// The grace main gives the app's stop(): its shutdown_deadline() is now + this.
inline constexpr Nanos kShutdownGrace = 5 * kNanosPerSecond;
// What is left of `deadline` on `clock` (never negative): the grace a gRPC server's stop gets.
std::chrono::milliseconds time_left(const Clock& clock, Nanos deadline);

// "off", "tls" or "mtls": the [tls] mode a daemon's "serving" line logs.
std::string_view tls_mode(const config::TlsConfig& tls);

// HTTP /metrics (one worker) on `listen`, the value of `[<section>] metrics_listen`, serving
// `render`; listening once it returns. A bad address or a failed bind: failure(name, ...) naming
// the key.
CliResult<std::unique_ptr<http::Server>> serve_metrics(std::string_view name, std::string_view section,
                                                       const std::string& listen,
                                                       std::function<std::string()> render);

// Writes --port-file and --metrics-port-file (those set), once everything serves.
CliResult<Ok> write_port_files(std::string_view name, const DaemonSetup& setup, uint16_t port,
                               uint16_t metrics_port);

// The main: --version, the options, --print-config; then, with SIGTERM and SIGINT blocked before
// any thread starts, App(setup) and `start` (which may poll the signals during a long start) ->
// READY=1 -> SIGTERM/SIGINT -> STOPPING=1 -> app.stop(app.shutdown_deadline()). Returns the exit
// status. `name` is the binary's ("cgn-power"); its logger is the name without "cgn-".
template <class App>
int run(int argc, char** argv, std::string_view name,
        CliResult<DaemonSetup> (*parse)(int, const char* const*),
        const std::function<CliResult<Ok>(App&, const ShutdownSignals&)>& start) {
  const std::string program(name);
  if (auto v = print_version_if_asked(argc, argv, program.c_str())) {
    return *v;
  }
  auto setup = parse(argc, argv);
  if (!setup) {
    return print_cli_exit(setup.error());
  }
  if (auto printed = print_mode(*setup)) {
    return print_cli_exit(*printed);
  }
  const std::string_view logger = name.starts_with("cgn-") ? name.substr(4) : name;
  const ShutdownSignals signals;  // before any thread starts
  App app(std::move(*setup));
  if (auto started = start(app, signals); !started) {
    return print_cli_exit(started.error());
  }
  sd::notify_ready(logger);
  const int sig = signals.wait();
  sd::notify_stopping(logger);
  CGN_LOG_INFO(log::get(std::string(logger)), "stopping", log::kv("signal", sig));
  app.stop(app.shutdown_deadline());
  return 0;
}

}  // namespace cgn::daemon
