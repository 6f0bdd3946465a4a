#include "ctl/ctl_app.h"

#include <map>

#include "ctl/verbs.h"

namespace cgn::ctl {

namespace {

constexpr const char* kAbout =
    "cgn-ctl: the Cognitora operator's CLI. Reads the router's /metrics and admin API, the agents' "
    "/metrics, and etcd ([state.etcd] of --config, TLS and auth included).\n"
    "Exit codes: 0 ok, 1 the operation failed, 2 usage or configuration, 3 etcd unreachable, "
    "4 router or agent unreachable, 5 the verb needs state_backend = \"etcd\", 6 no such node or recipe.";

Registry all_verbs() {
  Registry r;
  register_cluster_verbs(r);
  register_policy_verbs(r);
  register_tool_verbs(r);
  register_install_verbs(r);
  return r;
}

// The subcommand for `name` ("policy set": "set" under "policy", made once).
CLI::App* command_for(CLI::App& app, const Verb& v, std::map<std::string, CLI::App*>& groups) {
  const auto space = v.name.find(' ');
  if (space == std::string::npos) {
    return app.add_subcommand(v.name, v.help);
  }
  const std::string group = v.name.substr(0, space);
  CLI::App*& g = groups[group];
  if (g == nullptr) {
    g = app.add_subcommand(group, group + " commands");
    g->require_subcommand(1);
  }
  return g->add_subcommand(v.name.substr(space + 1), v.help);
}

}  // namespace

int run_ctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{kAbout, "cgn-ctl"};
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions g;
  app.add_option("--config", g.config,
                 "cognitora.toml: state_backend and [state.etcd] (default: built-in defaults)");
  app.add_option("--router", g.router, "the router, http://HOST:PORT")->capture_default_str();
  app.add_option("--admin-key-env", g.admin_key_env, "variable holding the router's [router.admin] key")
      ->capture_default_str();
  app.add_option("--metrics-key-env", g.metrics_key_env,
                 "variable holding the router's [router.metrics] key");
  app.add_option("--timeout-ms", g.timeout_ms, "each etcd or HTTP call")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  app.add_flag("--json", g.json, "JSON output for scripts");
  const Registry verbs = all_verbs();
  std::map<std::string, CLI::App*> groups;
  std::map<CLI::App*, VerbRun> runs;
  for (const auto& v : verbs) {
    CLI::App* cmd = command_for(app, v, groups);
    runs[cmd] = v.setup(*cmd);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? kOk : kUsage;
  }
  Ctx ctx(g, out, err);
  for (auto& [cmd, run] : runs) {
    if (cmd->parsed()) {
      return run(ctx);
    }
  }
  return ctx.fail(kUsage, "no command given (see --help)");
}

}  // namespace cgn::ctl
