#include "kvcached/kvcached_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "core/host_port.h"
#include "core/log.h"

namespace cgn::kvcached {

namespace {

Error<int> option_error(const std::string& message) {
  return cli_exit(2, "cgn-kvcached: " + message + "\n");
}

struct Overrides {
  std::string listen, metrics_listen, socket, ssd_dir;
  uint64_t ram_bytes = 0;
};

CliResult<Ok> check_host_port(const std::string& flag, const std::string& value) {
  if (!split_host_port(value)) {
    return option_error(fmt::format("{} \"{}\" is not HOST:PORT", flag, value));
  }
  return Ok{};
}

// The flags over [kvcached], checked as the config would check the keys.
CliResult<Ok> apply(const CLI::App& app, const Overrides& o, config::KvcachedConfig& k) {
  if (!o.listen.empty()) {
    if (auto st = check_host_port("--listen", o.listen); !st) {
      return st;
    }
    k.listen = o.listen;
  }
  if (!o.metrics_listen.empty()) {
    if (auto st = check_host_port("--metrics-listen", o.metrics_listen); !st) {
      return st;
    }
    k.metrics_listen = o.metrics_listen;
  }
  if (app.count("--socket") != 0) {
    k.socket = o.socket;
  }
  if (app.count("--ssd-dir") != 0) {
    k.ssd_dir = o.ssd_dir;
  }
  if (app.count("--ram-bytes") != 0) {
    if (o.ram_bytes < (1ull << 20)) {
      return option_error(fmt::format("--ram-bytes {} is below 1 MiB", o.ram_bytes));
    }
    if (o.ram_bytes < k.max_block_bytes) {
      return option_error(fmt::format("--ram-bytes {} is below [kvcached] max_block_bytes ({})", o.ram_bytes,
                                      k.max_block_bytes));
    }
    k.ram_bytes = o.ram_bytes;
  }
  return Ok{};
}

}  // namespace

CliResult<KvcachedSetup> parse_kvcached_options(int argc, const char* const* argv) {
  KvcachedSetup s;
  Overrides o;
  CLI::App app{
      "cgn-kvcached: the node-local tiered KV block store (RAM and SSD, gRPC and a local fast path)"};
  app.add_option("--config", s.config_path,
                 "cognitora.toml ([kvcached], [tls], [log]); default: every key at its default");
  app.add_option("--listen", o.listen, "HOST:PORT of the gRPC service KvCache (port 0: any free port)");
  app.add_option("--metrics-listen", o.metrics_listen, "HOST:PORT of HTTP /metrics (port 0: any free port)");
  app.add_option("--socket", o.socket, "the local fast path's Unix socket path (\"\": none)");
  app.add_option("--ssd-dir", o.ssd_dir, "the SSD tier's directory (\"\": no SSD tier)");
  app.add_option("--ram-bytes", o.ram_bytes, "the RAM tier's size in bytes");
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
                    "cgn-kvcached: " + std::string(e.what()) + "\n" + app.help());
  }
  if (!s.config_path.empty()) {
    auto cfg = config::load_config(s.config_path);
    if (!cfg) {
      return option_error(cfg.error().message);
    }
    s.config = std::move(*cfg);
  }
  if (auto st = apply(app, o, s.config.kvcached); !st) {
    return st.error();
  }
  if (!s.log_level.empty() && !log::is_level(s.log_level)) {
    return option_error(
        fmt::format("--log-level \"{}\" is not one of trace, debug, info, warn, error, off", s.log_level));
  }
  return s;
}

std::optional<Error<int>> kvcached_print_mode(const KvcachedSetup& setup) {
  if (!setup.print_config) {
    return std::nullopt;
  }
  return cli_exit(0, config::dump_config(setup.config));
}

kvcache::StoreConfig store_config(const config::KvcachedConfig& k) {
  kvcache::StoreConfig c;
  c.ram_bytes = k.ram_bytes;
  c.page_bytes = k.page_bytes;
  c.max_block_bytes = k.max_block_bytes;
  c.high_watermark = k.high_watermark;
  c.spill_fraction = k.spill_fraction;
  c.max_lease = static_cast<Nanos>(k.max_lease_ms) * 1'000'000;
  c.ssd_enabled = !k.ssd_dir.empty();
  c.ssd.dir = k.ssd_dir;
  c.ssd.max_bytes = k.ssd_max_bytes;
  c.ssd.segment_bytes = k.ssd_segment_bytes;
  c.ssd.ttl = static_cast<Nanos>(k.ssd_ttl_s) * kNanosPerSecond;
  c.ssd.direct_io = k.direct_io == "on"    ? kvcache::DirectIo::kOn
                    : k.direct_io == "off" ? kvcache::DirectIo::kOff
                                           : kvcache::DirectIo::kAuto;
  return c;
}

}  // namespace cgn::kvcached
