// cgn-router's command line: quick labs (--listen/--node/--policy) or the full setup from
// --config cognitora.toml (flags given alongside override the file). Pure parsing, so it is unit
// tested; main.cpp only acts on the result.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/result.h"
#include "router/gateway.h"

namespace cgn::router {

enum class OptionsError { kUsage, kConfig };

struct RouterSetup {
  config::CognitoraConfig config;
  std::string config_path;  // empty: quick lab (no SIGHUP reload source)
  GatewayOptions gateway;
  std::chrono::milliseconds poll_interval{1000};
  std::string port_file;  // write the bound port here once listening
  std::string log_level;  // --log-level, wins over [log] level
  bool print_config = false;
  bool help = false;
  std::string help_text;
};

// argv[0] is the program name. `exe_dir` is where the binary lives: the installed dashboard,
// <exe_dir>/../share/cognitora/dashboard, is served when it exists; else `source_dashboard` (the
// source tree's dashboard/) when it exists; --dashboard-dir overrides both.
Result<RouterSetup, OptionsError> parse_router_options(int argc, const char* const* argv,
                                                       const std::string& exe_dir,
                                                       const std::string& source_dashboard);

// Keys from the keys file and the environment variable the config names.
Result<ApiKeys, OptionsError> load_api_keys(const config::RouterConfig& cfg);

}  // namespace cgn::router
