// cgn-agent's command line over cognitora.toml: --config for [agent] and [engine], plus the
// launch options core's config has no key for yet (docs/agent.md, "Config keys wanted").
#pragma once

#include <string>
#include <string_view>

#include "agent/driver.h"
#include "core/cli_exit.h"
#include "core/config.h"

namespace cgn::agent {

struct AgentSetup {
  config::CognitoraConfig config;
  std::string config_path;
  std::string driver;  // [engine] kind, or --driver (needed for "external", which core rejects)
  LaunchOptions launch;
  std::string log_level;
  std::string grpc_port_file;  // --grpc-port-file: where to write the bound gRPC port (tests, port 0)
  std::string advertise;       // --advertise: the address published in the node record (empty: derived)
  bool print_command = false;  // print the engine command line (env first) and exit
  bool print_record = false;   // probe the GPU, print the node record JSON and exit
};

// --help: status 0 with the help text; a usage or config error: status 2 with "cgn-agent: " and
// the message naming the flag or key.
CliResult<AgentSetup> parse_agent_options(int argc, const char* const* argv);

// The address the node's engine and agent dial for cgn-kvcached, from [kvcached] listen: the
// same HOST:PORT, with a wildcard host (0.0.0.0, [::], empty) turned into loopback (127.0.0.1,
// [::1]). A listen without a port is returned as it is (the daemon rejects it at its own start).
std::string kvcached_target(std::string_view listen);

// "VAR=value ... argv..." with shell quoting where needed: what --print-command shows.
std::string render_command(const LaunchCommand& command);

}  // namespace cgn::agent
