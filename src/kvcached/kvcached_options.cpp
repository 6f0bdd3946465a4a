#include "kvcached/kvcached_options.h"

#include <fmt/format.h>

namespace cgn::kvcached {

namespace {

struct Overrides {
  std::string socket, ssd_dir;
  uint64_t ram_bytes = 0;
};

// The flags over [kvcached], checked as the config would check the keys.
std::optional<std::string> apply(const CLI::App& app, const Overrides& o, config::KvcachedConfig& k) {
  if (app.count("--socket") != 0) {
    k.socket = o.socket;
  }
  if (app.count("--ssd-dir") != 0) {
    k.ssd_dir = o.ssd_dir;
  }
  if (app.count("--ram-bytes") != 0) {
    if (o.ram_bytes < (1ull << 20)) {
      return fmt::format("--ram-bytes {} is below 1 MiB", o.ram_bytes);
    }
    if (o.ram_bytes < k.max_block_bytes) {
      return fmt::format("--ram-bytes {} is below [kvcached] max_block_bytes ({})", o.ram_bytes,
                         k.max_block_bytes);
    }
    k.ram_bytes = o.ram_bytes;
  }
  return std::nullopt;
}

}  // namespace

CliResult<KvcachedSetup> parse_kvcached_options(int argc, const char* const* argv) {
  Overrides o;
  daemon::CommandLine cl;
  cl.name = "cgn-kvcached";
  cl.description =
      "cgn-kvcached: the node-local tiered KV block store (RAM and SSD, gRPC and a local fast path)";
  cl.config_help = "cognitora.toml ([kvcached], [tls], [log]); default: every key at its default";
  cl.listen_help = "HOST:PORT of the gRPC service KvCache (port 0: any free port)";
  cl.listen_keys = [](config::CognitoraConfig& c) {
    return std::pair{&c.kvcached.listen, &c.kvcached.metrics_listen};
  };
  cl.add_flags = [&o](CLI::App& app) {
    app.add_option("--socket", o.socket, "the local fast path's Unix socket path (\"\": none)");
    app.add_option("--ssd-dir", o.ssd_dir, "the SSD tier's directory (\"\": no SSD tier)");
    app.add_option("--ram-bytes", o.ram_bytes, "the RAM tier's size in bytes");
  };
  cl.apply = [&o](const CLI::App& app, config::CognitoraConfig& c) { return apply(app, o, c.kvcached); };
  return daemon::parse_options(cl, argc, argv);
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
