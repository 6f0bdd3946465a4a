// cgn-kvcached's command line over cognitora.toml's [kvcached] (docs/kvcached.md): --config, the
// flags that override its keys, --print-config. Parsing has no side effects.
#pragma once

#include <string>

#include "core/cli_exit.h"
#include "core/config.h"
#include "kvcache/store_types.h"

namespace cgn::kvcached {

struct KvcachedSetup {
  config::CognitoraConfig config;
  std::string config_path;        // empty: every key at its default
  std::string log_level;          // --log-level over [log] level
  std::string port_file;          // --port-file: the bound gRPC port, once serving
  std::string metrics_port_file;  // --metrics-port-file: the bound /metrics port
  bool print_config = false;
};

// --help: status 0 with the help text; a usage error: CLI11's status; a bad value or config
// error: status 2 with "cgn-kvcached: " and the message naming the flag or key.
CliResult<KvcachedSetup> parse_kvcached_options(int argc, const char* const* argv);

// --print-config: status 0 with the effective configuration (defaults filled in); nullopt when
// the daemon should run.
std::optional<Error<int>> kvcached_print_mode(const KvcachedSetup& setup);

// The store's configuration from [kvcached] (pure).
kvcache::StoreConfig store_config(const config::KvcachedConfig& k);

}  // namespace cgn::kvcached
