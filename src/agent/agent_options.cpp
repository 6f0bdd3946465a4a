#include "agent/agent_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "state/backends.h"

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
  std::string role;
  std::string kv_offload;
  uint32_t side_port = 0;
  app.add_option("--config", s.config_path, "cognitora.toml ([agent] and [engine])")->required();
  app.add_option("--driver", s.driver,
                 "engine driver (default: [engine] kind); \"external\" attaches to a running engine");
  app.add_option("--role", role, "prefill, decode or both (default: [engine] role)");
  app.add_option(
      "--kv-offload", kv_offload,
      "none, nixl, lmcache, hicache, kvbm, cgn (default: none, or cgn when [engine] kv_offload = true)");
  app.add_option("--attach-kind", s.launch.attach_kind,
                 "external only: the engine whose health/metrics to use");
  app.add_option("--nixl-side-channel-host", s.launch.nixl_side_channel_host, "VLLM_NIXL_SIDE_CHANNEL_HOST");
  app.add_option("--nixl-side-channel-port", side_port, "VLLM_NIXL_SIDE_CHANNEL_PORT");
  app.add_option("--parallel-slots", s.launch.parallel_slots,
                 "llama.cpp --parallel (default: [engine] parallel_slots, 4)");
  std::string grpc_listen;
  app.add_option("--grpc-listen", grpc_listen,
                 "HOST:PORT of the gRPC service Agent (default: [agent] grpc_listen; port 0: any free port)");
  app.add_option("--grpc-port-file", s.grpc_port_file,
                 "write the bound gRPC port here once serving (for [agent] grpc_listen port 0)");
  app.add_option("--log-level", s.log_level, "trace, debug, info, warn, error, off");
  std::string listen, node_id, state_backend, etcd_endpoints, etcd_prefix;
  uint32_t publish_interval_ms = 0, lease_ttl_s = 0;
  bool no_engine_metrics = false;
  app.add_option("--listen", listen,
                 "HOST:PORT of the agent's data path, /health and /metrics (default: [agent] listen)");
  app.add_option(
      "--advertise", s.advertise,
      "HOST:PORT the router reaches this agent at, published in the node record (default: --listen, "
      "with a wildcard host replaced by the host name)");
  app.add_option("--node-id", node_id, "node id (default: [agent] node_id, else the host name)");
  app.add_option(
      "--state-backend", state_backend,
      "static (publish nothing) or etcd (publish the record and live KV prefixes; default: [agent] "
      "state_backend)");
  app.add_option("--etcd-endpoints", etcd_endpoints,
                 "comma-separated etcd endpoints (default: [state.etcd] endpoints)");
  app.add_option("--etcd-prefix", etcd_prefix,
                 "etcd: root of the keys (default: [state.etcd] prefix, /cognitora)");
  app.add_option("--publish-interval-ms", publish_interval_ms,
                 "etcd: at most one KV-prefix txn per interval (default: [agent] publish_interval_ms, 250)");
  app.add_option("--lease-ttl-s", lease_ttl_s,
                 "etcd: heartbeat lease TTL (default: [state.etcd] lease_ttl_s, 5)");
  app.add_flag("--no-engine-metrics", no_engine_metrics, "do not relay the engine's metrics on /metrics");
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
  auto& agent = s.config.agent;
  if (!listen.empty()) {
    if (listen.rfind(':') == std::string::npos) {
      return make_error(OptionsError::kUsage, fmt::format("--listen \"{}\" is not HOST:PORT", listen));
    }
    agent.listen = listen;
  }
  if (!node_id.empty()) {
    agent.node_id = node_id;
  }
  if (!state_backend.empty()) {
    if (!state::builtin_backends().find(state_backend)) {
      return make_error(OptionsError::kUsage,
                        fmt::format("--state-backend \"{}\" is not one of {}", state_backend,
                                    fmt::join(state::builtin_backends().names(), ", ")));
    }
    agent.state_backend = state_backend;
  }
  if (!etcd_endpoints.empty()) {
    s.config.state.etcd.endpoints.clear();
    size_t pos = 0;
    while (pos <= etcd_endpoints.size()) {
      size_t comma = etcd_endpoints.find(',', pos);
      if (comma == std::string::npos) {
        comma = etcd_endpoints.size();
      }
      if (comma > pos) {
        s.config.state.etcd.endpoints.push_back(etcd_endpoints.substr(pos, comma - pos));
      }
      pos = comma + 1;
    }
  }
  if (!etcd_prefix.empty()) {
    if (!etcd_prefix.starts_with('/')) {
      return make_error(OptionsError::kUsage,
                        fmt::format("--etcd-prefix \"{}\" must start with '/'", etcd_prefix));
    }
    s.config.state.etcd.prefix = etcd_prefix;
  }
  if (publish_interval_ms != 0) {
    if (publish_interval_ms < 10 || publish_interval_ms > 60000) {
      return make_error(OptionsError::kUsage, "--publish-interval-ms must be in [10, 60000]");
    }
    agent.publish_interval_ms = publish_interval_ms;
  }
  if (lease_ttl_s != 0) {
    if (lease_ttl_s < 2 || lease_ttl_s > 3600) {
      return make_error(OptionsError::kUsage, "--lease-ttl-s must be in [2, 3600]");
    }
    s.config.state.etcd.lease_ttl_s = lease_ttl_s;
  }
  if (no_engine_metrics) {
    agent.engine_metrics = false;
  }
  if (s.driver.empty()) {
    s.driver = s.config.engine.kind;
  }
  if (role.empty()) {
    role = s.config.engine.role;
  }
  if (!grpc_listen.empty()) {
    if (grpc_listen.rfind(':') == std::string::npos) {
      return make_error(OptionsError::kUsage,
                        fmt::format("--grpc-listen \"{}\" is not HOST:PORT", grpc_listen));
    }
    s.config.agent.grpc_listen = grpc_listen;
  }
  auto r = routing::parse_node_role(role);
  if (!r) {
    return make_error(OptionsError::kUsage,
                      fmt::format("--role \"{}\" is not one of prefill, decode, both", role));
  }
  s.launch.role = *r;
  if (kv_offload.empty()) {
    s.launch.kv_offload = parse_kv_offload(s.config.engine.kv_offload).value_or(KvOffload::kNone);
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
  // [engine] keys, unless a flag said otherwise.
  const auto& eng = s.config.engine;
  s.launch.nixl_side_channel_port = app.count("--nixl-side-channel-port") != 0
                                        ? static_cast<uint16_t>(side_port)
                                        : eng.nixl_side_channel_port;
  if (app.count("--nixl-side-channel-host") == 0) {
    s.launch.nixl_side_channel_host = eng.nixl_side_channel_host;
  }
  if (app.count("--parallel-slots") == 0) {
    s.launch.parallel_slots = eng.parallel_slots;
  }
  if (app.count("--attach-kind") == 0) {
    s.launch.attach_kind = eng.attach_kind;
  }
  s.launch.pd_transfer_backend = eng.pd_transfer_backend;
  s.launch.page_size = eng.page_size;
  s.launch.kv_events = eng.kv_events;
  s.launch.kv_events_port = eng.kv_events_port;
  if (eng.url.empty() && eng.host != "0.0.0.0" && eng.host != "::") {
    s.launch.engine_host = eng.host;  // a spawned engine bound to one address is reached there
  }
  if (!eng.url.empty()) {
    // external: http://HOST:PORT of the running engine (the agent reaches it over plain HTTP).
    std::string_view rest = eng.url;
    if (!rest.starts_with("http://")) {
      return make_error(OptionsError::kConfig, fmt::format("[engine] url \"{}\": only http:// engines can be "
                                                           "attached",
                                                           eng.url));
    }
    rest.remove_prefix(7);
    rest = rest.substr(0, rest.find('/'));
    const size_t colon = rest.rfind(':');
    unsigned port = 0;
    bool ok =
        colon != std::string_view::npos && colon > 0 && colon + 1 < rest.size() && colon + 6 >= rest.size();
    for (size_t i = colon + 1; ok && i < rest.size(); ++i) {
      ok = rest[i] >= '0' && rest[i] <= '9';
      port = port * 10 + static_cast<unsigned>(rest[i] - '0');
    }
    if (!ok || port == 0 || port > 65535) {
      return make_error(
          OptionsError::kConfig,
          fmt::format("[engine] url \"{}\" must be http://HOST:PORT with an explicit port", eng.url));
    }
    s.launch.engine_host = std::string(rest.substr(0, colon));
    s.config.engine.port = static_cast<uint16_t>(port);
  }
  return s;
}

}  // namespace cgn::agent
