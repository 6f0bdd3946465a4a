#include "core/daemon/daemon.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/atomic_file.h"
#include "core/host_port.h"
#include "core/http/server.h"

namespace cgn::daemon {

namespace {

// --listen and --metrics-listen over the section's keys, checked as the config checks them.
std::optional<std::string> apply_listen(const std::string& listen, const std::string& metrics_listen,
                                        std::pair<std::string*, std::string*> keys) {
  for (auto [flag, value, key] : {std::tuple{"--listen", &listen, keys.first},
                                  std::tuple{"--metrics-listen", &metrics_listen, keys.second}}) {
    if (value->empty()) {
      continue;
    }
    if (!split_host_port(*value)) {
      return fmt::format("{} \"{}\" is not HOST:PORT", flag, *value);
    }
    *key = *value;
  }
  return std::nullopt;
}

}  // namespace

Error<int> failure(std::string_view name, std::string_view message) {
  return cli_exit(2, fmt::format("{}: {}\n", name, message));
}

CliResult<DaemonSetup> parse_options(const CommandLine& cl, int argc, const char* const* argv) {
  DaemonSetup s;
  std::string listen;
  std::string metrics_listen;
  CLI::App app{cl.description};
  app.add_option("--config", s.config_path, cl.config_help);
  app.add_option("--listen", listen, cl.listen_help);
  app.add_option("--metrics-listen", metrics_listen, "HOST:PORT of HTTP /metrics (port 0: any free port)");
  cl.add_flags(app);
  app.add_option("--port-file", s.port_file, "write the bound gRPC port here once serving");
  app.add_option("--metrics-port-file", s.metrics_port_file,
                 "write the bound /metrics port here once serving");
  app.add_option("--log-level", s.log_level, "trace, debug, info, warn, error, off");
  app.add_flag("--print-config", s.print_config, "print the effective configuration and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return cli_exit(0, app.help());
  } catch (const CLI::ParseError& e) {
    return cli_exit(e.get_exit_code() == 0 ? 2 : e.get_exit_code(),
                    cl.name + ": " + std::string(e.what()) + "\n" + app.help());
  }
  if (!s.config_path.empty()) {
    auto cfg = config::load_config(s.config_path);
    if (!cfg) {
      return failure(cl.name, cfg.error().message);
    }
    s.config = std::move(*cfg);
  }
  if (auto why = apply_listen(listen, metrics_listen, cl.listen_keys(s.config))) {
    return failure(cl.name, *why);
  }
  if (auto why = cl.apply(app, s.config)) {
    return failure(cl.name, *why);
  }
  if (!s.log_level.empty() && !log::is_level(s.log_level)) {
    return failure(
        cl.name,
        fmt::format("--log-level \"{}\" is not one of trace, debug, info, warn, error, off", s.log_level));
  }
  return s;
}

std::optional<Error<int>> print_mode(const DaemonSetup& setup) {
  if (!setup.print_config) {
    return std::nullopt;
  }
  return cli_exit(0, config::dump_config(setup.config));
}

std::chrono::milliseconds time_left(const Clock& clock, Nanos deadline) {
  return std::chrono::milliseconds(std::max<Nanos>(0, deadline - clock.now()) / kNanosPerMilli);
}

std::string_view tls_mode(const config::TlsConfig& tls) {
  return tls.enabled() ? (tls.require_client_cert ? "mtls" : "tls") : "off";
}

CliResult<std::unique_ptr<http::Server>> serve_metrics(std::string_view name, std::string_view section,
                                                       const std::string& listen,
                                                       std::function<std::string()> render) {
  auto hp = split_host_port(listen);
  if (!hp) {
    return failure(name, fmt::format("[{}] metrics_listen \"{}\" is not HOST:PORT", section, listen));
  }
  http::ServerConfig sc;
  sc.host = hp->first;
  sc.port = hp->second;
  sc.threads = 1;
  http::RouteTable routes;
  routes.get("/metrics", http::metrics_handler(std::move(render)));
  auto server = std::make_unique<http::Server>(sc, std::move(routes));
  if (auto bound = server->start(); !bound) {
    return failure(name, fmt::format("[{}] metrics_listen {}: {}", section, listen, bound.error().message));
  }
  return server;
}

CliResult<Ok> write_port_files(std::string_view name, const DaemonSetup& setup, uint16_t port,
                               uint16_t metrics_port) {
  for (auto [flag, path, value] :
       {std::tuple{"--port-file", &setup.port_file, port},
        std::tuple{"--metrics-port-file", &setup.metrics_port_file, metrics_port}}) {
    if (path->empty()) {
      continue;
    }
    if (auto w = write_port_file(*path, value); !w) {
      return failure(name, fmt::format("{}: {}", flag, w.error().message));
    }
  }
  return Ok{};
}

}  // namespace cgn::daemon
