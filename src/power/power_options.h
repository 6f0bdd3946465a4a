// cgn-power's command line over cognitora.toml's [power] (docs/power.md): the daemons' common
// flags (core/daemon/daemon.h: --config, --listen, --metrics-listen, the port files, --log-level,
// --print-config) and --poll-interval-ms. Parsing has no side effects.
#pragma once

#include "core/cli_exit.h"
#include "core/daemon/daemon.h"

namespace cgn::power {

using PowerSetup = daemon::DaemonSetup;

// --help: status 0 with the help text; a usage error: CLI11's status; a bad value or config error:
// status 2 with "cgn-power: " and the message naming the flag or key.
CliResult<PowerSetup> parse_power_options(int argc, const char* const* argv);

}  // namespace cgn::power
