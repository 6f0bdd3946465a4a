#include "agent/agent_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

namespace cgn::agent {

namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@%+") ==
          std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

std::string render_command(const LaunchCommand& command) {
  std::string out;
  for (const auto& [k, v] : command.env) {
    out += k + "=" + shell_quote(v) + " ";
  }
  for (size_t i = 0; i < command.argv.size(); ++i) {
    out += (i == 0 ? "" : " ") + shell_quote(command.argv[i]);
  }
  return out;
}

Result<AgentSetup, OptionsError> parse_agent_options(int argc, const char* const* argv) {
  AgentSetup s;
  CLI::App app{"cgn-agent: runs one inference engine and publishes its node record"};
  std::string role = "both";
  std::string kv_offload;
  uint32_t side_port = 0;
  app.add_option("--config", s.config_path, "cognitora.toml ([agent] and [engine])")->required();
  app.add_option("--driver", s.driver,
                 "engine driver (default: [engine] kind); \"external\" attaches to a running engine");
  app.add_option("--role", role, "prefill, decode or both (default both)");
  app.add_option(
      "--kv-offload", kv_offload,
      "none, nixl, lmcache, hicache, kvbm, cgn (default: none, or cgn when [engine] kv_offload = true)");
  app.add_option("--attach-kind", s.launch.attach_kind,
                 "external only: the engine whose health/metrics to use");
  app.add_option("--nixl-side-channel-host", s.launch.nixl_side_channel_host, "VLLM_NIXL_SIDE_CHANNEL_HOST");
  app.add_option("--nixl-side-channel-port", side_port, "VLLM_NIXL_SIDE_CHANNEL_PORT");
  app.add_option("--parallel-slots", s.launch.parallel_slots, "llama.cpp -np (default 4)");
  app.add_option("--log-level", s.log_level, "trace, debug, info, warn, error, off");
  app.add_flag("--print-command", s.print_command, "print the engine's command line and exit");
  app.add_flag("--print-record", s.print_record, "probe the GPU, print the node record and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    s.help = true;
    s.help_text = app.help();
    return s;
  } catch (const CLI::ParseError& e) {
    return make_error(OptionsError::kUsage, std::string(e.what()) + "\n" + app.help());
  }
  auto cfg = config::load_config(s.config_path);
  if (!cfg) {
    return make_error(OptionsError::kConfig, cfg.error().message);
  }
  s.config = std::move(*cfg);
  if (s.driver.empty()) {
    s.driver = s.config.engine.kind;
  }
  auto r = routing::parse_node_role(role);
  if (!r) {
    return make_error(OptionsError::kUsage,
                      fmt::format("--role \"{}\" is not one of prefill, decode, both", role));
  }
  s.launch.role = *r;
  if (kv_offload.empty()) {
    s.launch.kv_offload = s.config.engine.kv_offload ? KvOffload::kCgn : KvOffload::kNone;
  } else {
    auto k = parse_kv_offload(kv_offload);
    if (!k) {
      return make_error(
          OptionsError::kUsage,
          fmt::format("--kv-offload \"{}\" is not one of none, nixl, lmcache, hicache, kvbm, cgn",
                      kv_offload));
    }
    s.launch.kv_offload = *k;
  }
  if (side_port > 65535) {
    return make_error(OptionsError::kUsage, "--nixl-side-channel-port must be at most 65535");
  }
  s.launch.nixl_side_channel_port = static_cast<uint16_t>(side_port);
  return s;
}

}  // namespace cgn::agent
