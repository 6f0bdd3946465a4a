#include "agent/agent_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <variant>

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

// Status 2 and the message, as main prints it.
Error<int> option_error(const std::string& message) {
  return cli_exit(2, "cgn-agent: " + message + "\n");
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

namespace {

// The flags that override a cognitora.toml key (empty / 0: not given).
struct Overrides {
  std::string role, kv_offload, grpc_listen, listen, node_id, state_backend, etcd_endpoints, etcd_prefix;
  uint32_t side_port = 0, publish_interval_ms = 0, lease_ttl_s = 0;
  bool no_engine_metrics = false;
};

// One flag taking a value, in the order --help lists them.
struct ValueFlag {
  const char* name;
  std::variant<std::string*, uint32_t*> target;
  const char* help;
};

void add_flags(CLI::App& app, AgentSetup& s, Overrides& o) {
  app.add_option("--config", s.config_path, "cognitora.toml ([agent] and [engine])")->required();
  const ValueFlag values[] = {
      {"--driver", &s.driver,
       "engine driver (default: [engine] kind); \"external\" attaches to a running engine"},
      {"--role", &o.role, "prefill, decode or both (default: [engine] role)"},
      {"--kv-offload", &o.kv_offload,
       "none, nixl, lmcache, hicache, kvbm, cgn (default: none, or cgn when [engine] kv_offload = true)"},
      {"--attach-kind", &s.launch.attach_kind, "external only: the engine whose health/metrics to use"},
      {"--nixl-side-channel-host", &s.launch.nixl_side_channel_host, "VLLM_NIXL_SIDE_CHANNEL_HOST"},
      {"--nixl-side-channel-port", &o.side_port, "VLLM_NIXL_SIDE_CHANNEL_PORT"},
      {"--parallel-slots", &s.launch.parallel_slots,
       "llama.cpp --parallel (default: [engine] parallel_slots, 4)"},
      {"--grpc-listen", &o.grpc_listen,
       "HOST:PORT of the gRPC service Agent (default: [agent] grpc_listen; port 0: any free port)"},
      {"--grpc-port-file", &s.grpc_port_file,
       "write the bound gRPC port here once serving (for [agent] grpc_listen port 0)"},
      {"--log-level", &s.log_level, "trace, debug, info, warn, error, off"},
      {"--listen", &o.listen,
       "HOST:PORT of the agent's data path, /health and /metrics (default: [agent] listen)"},
      {"--advertise", &s.advertise,
       "HOST:PORT the router reaches this agent at, published in the node record (default: --listen, "
       "with a wildcard host replaced by the host name)"},
      {"--node-id", &o.node_id, "node id (default: [agent] node_id, else the host name)"},
      {"--state-backend", &o.state_backend,
       "static (publish nothing) or etcd (publish the record and live KV prefixes; default: [agent] "
       "state_backend)"},
      {"--etcd-endpoints", &o.etcd_endpoints,
       "comma-separated etcd endpoints (default: [state.etcd] endpoints)"},
      {"--etcd-prefix", &o.etcd_prefix, "etcd: root of the keys (default: [state.etcd] prefix, /cognitora)"},
      {"--publish-interval-ms", &o.publish_interval_ms,
       "etcd: at most one KV-prefix txn per interval (default: [agent] publish_interval_ms, 250)"},
      {"--lease-ttl-s", &o.lease_ttl_s, "etcd: heartbeat lease TTL (default: [state.etcd] lease_ttl_s, 5)"},
  };
  for (const auto& f : values) {
    std::visit([&](auto* target) { app.add_option(f.name, *target, f.help); }, f.target);
  }
  app.add_flag("--no-engine-metrics", o.no_engine_metrics, "do not relay the engine's metrics on /metrics");
  app.add_flag("--print-command", s.print_command, "print the engine's command line and exit");
  app.add_flag("--print-record", s.print_record, "probe the GPU, print the node record and exit");
}

// "a,b,,c" -> {a, b, c}.
std::vector<std::string> split_endpoints(const std::string& list) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) {
      comma = list.size();
    }
    if (comma > pos) {
      out.push_back(list.substr(pos, comma - pos));
    }
    pos = comma + 1;
  }
  return out;
}

// --listen, --node-id, --state-backend, --no-engine-metrics over [agent].
CliResult<Ok> apply_agent_flags(const Overrides& o, AgentSetup& s) {
  auto& agent = s.config.agent;
  if (!o.listen.empty()) {
    if (o.listen.rfind(':') == std::string::npos) {
      return option_error(fmt::format("--listen \"{}\" is not HOST:PORT", o.listen));
    }
    agent.listen = o.listen;
  }
  if (!o.node_id.empty()) {
    agent.node_id = o.node_id;
  }
  if (!o.state_backend.empty()) {
    if (!state::builtin_backends().find(o.state_backend)) {
      return option_error(fmt::format("--state-backend \"{}\" is not one of {}", o.state_backend,
                                      fmt::join(state::builtin_backends().names(), ", ")));
    }
    agent.state_backend = o.state_backend;
  }
  if (o.no_engine_metrics) {
    agent.engine_metrics = false;
  }
  return Ok{};
}

// --etcd-endpoints, --etcd-prefix, --publish-interval-ms, --lease-ttl-s over [state.etcd] / [agent].
CliResult<Ok> apply_etcd_flags(const Overrides& o, AgentSetup& s) {
  if (!o.etcd_endpoints.empty()) {
    s.config.state.etcd.endpoints = split_endpoints(o.etcd_endpoints);
  }
  if (!o.etcd_prefix.empty()) {
    if (!o.etcd_prefix.starts_with('/')) {
      return option_error(fmt::format("--etcd-prefix \"{}\" must start with '/'", o.etcd_prefix));
    }
    s.config.state.etcd.prefix = o.etcd_prefix;
  }
  if (o.publish_interval_ms != 0) {
    if (o.publish_interval_ms < 10 || o.publish_interval_ms > 60000) {
      return option_error("--publish-interval-ms must be in [10, 60000]");
    }
    s.config.agent.publish_interval_ms = o.publish_interval_ms;
  }
  if (o.lease_ttl_s != 0) {
    if (o.lease_ttl_s < 2 || o.lease_ttl_s > 3600) {
      return option_error("--lease-ttl-s must be in [2, 3600]");
    }
    s.config.state.etcd.lease_ttl_s = o.lease_ttl_s;
  }
  return Ok{};
}

// --grpc-listen over [agent] grpc_listen.
CliResult<Ok> apply_grpc_listen(const Overrides& o, AgentSetup& s) {
  if (!o.grpc_listen.empty()) {
    if (o.grpc_listen.rfind(':') == std::string::npos) {
      return option_error(fmt::format("--grpc-listen \"{}\" is not HOST:PORT", o.grpc_listen));
    }
    s.config.agent.grpc_listen = o.grpc_listen;
  }
  return Ok{};
}

// The launch options: --driver, --role, --kv-offload and the NIXL / llama.cpp / external flags,
// each defaulting to its [engine] key.
CliResult<Ok> apply_launch_flags(const Overrides& o, const CLI::App& app, AgentSetup& s) {
  const auto& eng = s.config.engine;
  if (s.driver.empty()) {
    s.driver = eng.kind;
  }
  const std::string role = o.role.empty() ? eng.role : o.role;
  auto r = routing::parse_node_role(role);
  if (!r) {
    return option_error(fmt::format("--role \"{}\" is not one of prefill, decode, both", role));
  }
  s.launch.role = *r;
  if (o.kv_offload.empty()) {
    s.launch.kv_offload = parse_kv_offload(eng.kv_offload).value_or(KvOffload::kNone);
  } else {
    auto k = parse_kv_offload(o.kv_offload);
    if (!k) {
      return option_error(fmt::format(
          "--kv-offload \"{}\" is not one of none, nixl, lmcache, hicache, kvbm, cgn", o.kv_offload));
    }
    s.launch.kv_offload = *k;
  }
  if (o.side_port > 65535) {
    return option_error("--nixl-side-channel-port must be at most 65535");
  }
  // [engine] keys, unless a flag said otherwise.
  s.launch.nixl_side_channel_port = app.count("--nixl-side-channel-port") != 0
                                        ? static_cast<uint16_t>(o.side_port)
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
  // kv_offload = "cgn": the node's cgn-kvcached ([kvcached] listen and socket; docs/agent.md).
  s.launch.kvcached_target = kvcached_target(s.config.kvcached.listen);
  s.launch.kvcached_socket = s.config.kvcached.socket;
  if (eng.url.empty() && eng.host != "0.0.0.0" && eng.host != "::") {
    s.launch.engine_host = eng.host;  // a spawned engine bound to one address is reached there
  }
  return Ok{};
}

// external: [engine] url = http://HOST:PORT of the running engine (the agent reaches it over
// plain HTTP) -> the engine host and port.
CliResult<Ok> apply_engine_url(AgentSetup& s) {
  const std::string& url = s.config.engine.url;
  if (url.empty()) {
    return Ok{};
  }
  std::string_view rest = url;
  if (!rest.starts_with("http://")) {
    return option_error(fmt::format("[engine] url \"{}\": only http:// engines can be attached", url));
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
    return option_error(
        fmt::format("[engine] url \"{}\" must be http://HOST:PORT with an explicit port", url));
  }
  s.launch.engine_host = std::string(rest.substr(0, colon));
  s.config.engine.port = static_cast<uint16_t>(port);
  return Ok{};
}

}  // namespace

std::string kvcached_target(std::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos) {
    return std::string(listen);
  }
  const std::string_view host = listen.substr(0, colon);
  const std::string_view port = listen.substr(colon);  // ":PORT"
  if (host.empty() || host == "0.0.0.0") {
    return "127.0.0.1" + std::string(port);
  }
  if (host == "[::]" || host == "::") {
    return "[::1]" + std::string(port);
  }
  return std::string(listen);
}

CliResult<AgentSetup> parse_agent_options(int argc, const char* const* argv) {
  AgentSetup s;
  CLI::App app{"cgn-agent: runs one inference engine and publishes its node record"};
  Overrides o;
  add_flags(app, s, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return cli_exit(0, app.help());
  } catch (const CLI::ParseError& e) {
    return option_error(std::string(e.what()) + "\n" + app.help());
  }
  auto cfg = config::load_config(s.config_path);
  if (!cfg) {
    return option_error(cfg.error().message);
  }
  s.config = std::move(*cfg);
  // In this order, so that of several errors the same one is reported as ever.
  CliResult<Ok> st = apply_agent_flags(o, s);
  if (st) {
    st = apply_etcd_flags(o, s);
  }
  if (st) {
    st = apply_grpc_listen(o, s);
  }
  if (st) {
    st = apply_launch_flags(o, app, s);
  }
  if (st) {
    st = apply_engine_url(s);
  }
  if (!st) {
    return st.error();
  }
  return s;
}

}  // namespace cgn::agent
