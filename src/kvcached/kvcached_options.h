// cgn-kvcached's command line over cognitora.toml's [kvcached] (docs/kvcached.md): the daemons'
// common flags (core/daemon/daemon.h: --config, --listen, --metrics-listen, the port files,
// --log-level, --print-config) and the flags over [kvcached]'s keys. Parsing has no side effects.
#pragma once

#include <optional>

#include "core/cli_exit.h"
#include "core/config.h"
#include "core/daemon/daemon.h"
#include "kvcache/store_types.h"

namespace cgn::kvcached {

using KvcachedSetup = daemon::DaemonSetup;

// --help: status 0 with the help text; a usage error: CLI11's status; a bad value or config
// error: status 2 with "cgn-kvcached: " and the message naming the flag or key.
CliResult<KvcachedSetup> parse_kvcached_options(int argc, const char* const* argv);

// --print-config: daemon::print_mode (status 0 with the effective configuration, defaults filled
// in; nullopt when the daemon should run).
inline std::optional<Error<int>> kvcached_print_mode(const KvcachedSetup& setup) {
  return daemon::print_mode(setup);
}

// The store's configuration from [kvcached] (pure).
kvcache::StoreConfig store_config(const config::KvcachedConfig& k);

}  // namespace cgn::kvcached
