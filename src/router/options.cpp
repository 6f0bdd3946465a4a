#include "router/options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <thread>

#include "routing/policies.h"

namespace cgn::router {

namespace {
bool file_exists(const std::string& p) {
  std::error_code ec;
  return !p.empty() && std::filesystem::exists(p, ec);
}
}  // namespace

Result<RouterSetup, OptionsError> parse_router_options(int argc, const char* const* argv,
                                                       const std::string& exe_dir,
                                                       const std::string& source_dashboard) {
  RouterSetup s;
  CLI::App app{"cgn-router: the Cognitora OpenAI-compatible gateway"};
  std::string listen;
  std::vector<std::string> nodes;
  std::string policy;
  std::string keys_file;
  std::string dashboard_dir;
  size_t threads = 0;
  uint32_t poll_ms = 0;
  app.add_option("--config", s.config_path, "cognitora.toml (full setup; flags below override it)");
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: any free port)");
  app.add_option("--node", nodes, "URL of an OpenAI-compatible engine (repeatable; quick lab)");
  app.add_option("--policy", policy, "routing policy: kv, round_robin, random, least_load, session");
  app.add_option("--api-keys-file", keys_file, "file with one API key per line");
  app.add_option("--dashboard-dir", dashboard_dir, "directory of the dashboard served at /dashboard/");
  app.add_option("--threads", threads, "server worker threads (default: cores, at most 8)");
  app.add_option("--poll-interval-ms", poll_ms,
                 "node health/metrics poll period (default 1000, or the config's)");
  app.add_option("--port-file", s.port_file, "write the bound port to this file once listening");
  app.add_option("--log-level", s.log_level, "trace, debug, info, warn, error, off");
  app.add_flag("--print-config", s.print_config, "print the effective configuration and exit");
  std::vector<std::string> etcd;
  std::string etcd_prefix;
  app.add_option(
      "--etcd", etcd,
      "etcd endpoint URL (repeatable): state_backend = \"etcd\" with these [state.etcd] endpoints");
  app.add_option("--etcd-prefix", etcd_prefix, "[state.etcd] prefix (default /cognitora)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    s.help = true;
    s.help_text = app.help();
    return s;
  } catch (const CLI::ParseError& e) {
    return make_error(OptionsError::kUsage, std::string(e.what()) + "\n" + app.help());
  }

  if (!s.config_path.empty()) {
    auto cfg = config::load_config(s.config_path);
    if (!cfg) {
      return make_error(OptionsError::kConfig, cfg.error().message);
    }
    s.config = std::move(*cfg);
    s.poll_interval = std::chrono::milliseconds(s.config.router.timeouts.health_interval_ms);
  } else {
    // Quick lab: loopback by default, no config file.
    s.config.router.listen = "127.0.0.1:8080";
  }
  auto& rc = s.config.router;
  if (!listen.empty()) {
    rc.listen = listen;
  }
  if (auto l = parse_listen(rc.listen); !l) {
    return make_error(OptionsError::kUsage, l.error().message);
  }
  for (const auto& url : nodes) {
    config::NodeConfig n;
    n.url = url;
    rc.nodes.push_back(n);
  }
  if (!policy.empty()) {
    if (!routing::find_policy(policy)) {
      return make_error(OptionsError::kUsage,
                        fmt::format("--policy \"{}\" is not one of {}", policy,
                                    fmt::join(routing::builtin_policies().names(), ", ")));
    }
    rc.policy = policy;
  }
  if (!keys_file.empty()) {
    rc.api_keys_file = keys_file;
  }
  if (!etcd.empty()) {
    rc.state_backend = "etcd";
    s.config.state.etcd.endpoints = etcd;
  }
  if (!etcd_prefix.empty()) {
    s.config.state.etcd.prefix = etcd_prefix;
  }
  if (rc.state_backend == "etcd" && !rc.nodes.empty()) {
    return make_error(OptionsError::kUsage,
                      "state_backend \"etcd\" takes its nodes from etcd: drop --node / [[router.nodes]]");
  }
  if (rc.state_backend == "etcd" && !s.config.state.etcd.prefix.starts_with('/')) {
    return make_error(OptionsError::kUsage, "--etcd-prefix must start with '/'");
  }
  if (poll_ms > 0) {
    s.poll_interval = std::chrono::milliseconds(poll_ms);
  }
  s.gateway.router = rc;
  s.gateway.cluster_token = auth::ClusterToken(s.config.cluster.tokens);
  s.gateway.tls = s.config.tls;
  const size_t hw = std::max<size_t>(1, std::thread::hardware_concurrency());
  s.gateway.threads = threads > 0 ? threads : std::min<size_t>(hw, 8);
  // --dashboard-dir, else the installed copy beside the binary (cmake --install puts it in
  // <prefix>/share/cognitora/dashboard), else the source tree the binary was built from.
  if (!dashboard_dir.empty()) {
    s.gateway.dashboard_dir = dashboard_dir;
  } else if (file_exists(exe_dir + "/../share/cognitora/dashboard/index.html")) {
    s.gateway.dashboard_dir = exe_dir + "/../share/cognitora/dashboard";
  } else if (file_exists(source_dashboard + "/index.html")) {
    s.gateway.dashboard_dir = source_dashboard;
  }
  return s;
}

Result<ApiKeys, OptionsError> load_api_keys(const config::RouterConfig& cfg) {
  ApiKeys keys;
  if (!cfg.api_keys_file.empty()) {
    auto k = ApiKeys::load_file(cfg.api_keys_file);
    if (!k) {
      return make_error(OptionsError::kConfig, k.error().message);
    }
    keys = std::move(*k);
  }
  const auto env_keys = cfg.api_keys_from_env();
  if (!env_keys.empty()) {
    auto st = keys.add(env_keys, "environment variable " + cfg.api_keys.env_name());
    if (!st) {
      return make_error(OptionsError::kConfig, st.error().message);
    }
  }
  return keys;
}

}  // namespace cgn::router
