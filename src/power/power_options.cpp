#include "power/power_options.h"

#include <fmt/format.h>

namespace cgn::power {

CliResult<PowerSetup> parse_power_options(int argc, const char* const* argv) {
  uint32_t poll_interval_ms = 0;
  daemon::CommandLine cl;
  cl.name = "cgn-power";
  cl.description =
      "cgn-power: the node's power and energy reader (GPUs, CPU, chassis), served over gRPC and /metrics";
  cl.config_help = "cognitora.toml ([power], [tls], [log]); default: every key at its default (no sources)";
  cl.listen_help = "HOST:PORT of the gRPC service Power (port 0: any free port)";
  cl.listen_keys = [](config::CognitoraConfig& c) {
    return std::pair{&c.power.listen, &c.power.metrics_listen};
  };
  cl.add_flags = [&](CLI::App& app) {
    app.add_option("--poll-interval-ms", poll_interval_ms, "how often every source is read");
  };
  cl.apply = [&](const CLI::App& app, config::CognitoraConfig& c) -> std::optional<std::string> {
    if (app.count("--poll-interval-ms") == 0) {
      return std::nullopt;
    }
    if (poll_interval_ms < 10) {
      return fmt::format("--poll-interval-ms {} is below 10", poll_interval_ms);
    }
    c.power.poll_interval_ms = poll_interval_ms;
    return std::nullopt;
  };
  return daemon::parse_options(cl, argc, argv);
}

}  // namespace cgn::power
