#include <fstream>
#include <sstream>

#include "ctl/verbs.h"
#include "router/policy_config.h"
#include "routing/policies.h"
#include "state/etcd/etcd_store.h"

namespace cgn::ctl {

namespace {

struct SetArgs {
  std::string file;
  std::string policy;
  std::vector<std::string> sets;  // KEY=VALUE under [router.routing]
  bool dry_run = false;
};

// The policy value to write: the file, or [router] policy and [router.routing] keys built from flags.
Result<std::string, int> policy_text(Ctx& ctx, const SetArgs& a) {
  if (!a.file.empty()) {
    std::ifstream in(a.file);
    if (!in) {
      return make_error(ctx.fail(kUsage, "cannot read " + a.file), "file");
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  if (a.policy.empty() && a.sets.empty()) {
    return make_error(ctx.fail(kUsage, "policy set: give --file, or a policy name and/or --set KEY=VALUE"),
                      "args");
  }
  std::string text = "[router]\n";
  if (!a.policy.empty()) {
    text += "policy = \"" + a.policy + "\"\n";
  }
  if (!a.sets.empty()) {
    text += "\n[router.routing]\n";
    for (const auto& s : a.sets) {
      const auto eq = s.find('=');
      if (eq == std::string::npos || eq == 0) {
        return make_error(ctx.fail(kUsage, "--set '" + s + "' is not KEY=VALUE"), "args");
      }
      text += s.substr(0, eq) + " = " + s.substr(eq + 1) + "\n";
    }
  }
  return text;
}

// The router's own check: the cognitora.toml reader, then the policy registry.
Result<routing::RoutingPolicy, std::string> validate(const std::string& text, const std::string& origin) {
  auto cfg = state::parse_policy_value(text, origin);
  if (!cfg) {
    return make_error(std::string("config"), cfg.error().message);
  }
  auto p = router::policy_from_config(*cfg);
  if (!p) {
    return make_error(std::string("policy"), "[router] policy: " + p.error().message);
  }
  return *p;
}

int policy_get(Ctx& ctx) {
  auto client = ctx.etcd("policy get");
  if (!client) {
    return client.error().code;
  }
  const std::string key = ctx.key("policy");
  auto r = (*client)->get(key);
  if (!r) {
    return ctx.fail(kNoEtcd, "etcd: " + r.error().message);
  }
  if (r->kvs.empty()) {
    ctx.emit({{"key", key}, {"set", false}},
             key + " is absent: each router routes with its own [router] policy and [router.routing]\n");
    return kOk;
  }
  const std::string& text = r->kvs[0].value;
  auto p = validate(text, key);
  nlohmann::json j = {{"key", key}, {"set", true}, {"text", text}, {"revision", r->kvs[0].mod_revision}};
  std::string human = key + " (etcd revision " + std::to_string(r->kvs[0].mod_revision) + "):\n" + text;
  if (p) {
    j["policy"] = p->ranking->name();
    j["differs_from_defaults"] = router::describe_policy_change(routing::RoutingPolicy{}, *p);
    human += "\npolicy: " + p->ranking->name() + "\nvs defaults: " +
             (j["differs_from_defaults"].get<std::string>().empty()
                  ? std::string("none")
                  : j["differs_from_defaults"].get<std::string>()) +
             "\n";
  } else {
    j["error"] = p.error().message;
    human += "\nrouters reject it: " + p.error().message + "\n";
  }
  ctx.emit(j, human);
  return kOk;
}

int policy_set(Ctx& ctx, const SetArgs& a) {
  auto text = policy_text(ctx, a);
  if (!text) {
    return text.error().code;
  }
  const std::string key = ctx.key("policy");
  auto p = validate(*text, a.file.empty() ? "cgn-ctl policy set" : a.file);
  if (!p) {
    return ctx.fail(kFailed, "policy rejected, nothing written: " + p.error().message);
  }
  if (a.dry_run) {
    ctx.emit({{"key", key}, {"text", *text}, {"policy", p->ranking->name()}, {"written", false}},
             "valid; would write " + key + ":\n" + *text);
    return kOk;
  }
  auto client = ctx.etcd("policy set");
  if (!client) {
    return client.error().code;
  }
  auto w = (*client)->put(key, *text);
  if (!w) {
    return ctx.fail(kNoEtcd, "etcd: " + w.error().message);
  }
  ctx.emit({{"key", key},
            {"text", *text},
            {"policy", p->ranking->name()},
            {"written", true},
            {"revision", w->revision}},
           "policy " + p->ranking->name() + " written to " + key + " (etcd revision " +
               std::to_string(w->revision) + "); routers apply it now\n");
  return kOk;
}

}  // namespace

void register_policy_verbs(Registry& r) {
  r.push_back({"policy get",
               "the routing policy in etcd (/cognitora/policy) and how it differs from the defaults",
               [](CLI::App&) -> VerbRun { return policy_get; }});
  r.push_back(
      {"policy set", "validate a routing policy with the router's own config code, then write it to etcd",
       [](CLI::App& cmd) -> VerbRun {
         auto a = std::make_shared<SetArgs>();
         cmd.add_option("policy", a->policy, "a registered policy name (kv, round_robin, least_load, ...)");
         cmd.add_option("--file", a->file, "a cognitora.toml text ([router] policy, [router.routing])");
         cmd.add_option("--set", a->sets, "KEY=VALUE under [router.routing] (TOML value), repeatable");
         cmd.add_flag("--dry-run", a->dry_run, "validate and print, write nothing");
         return [a](Ctx& ctx) { return policy_set(ctx, *a); };
       }});
}

}  // namespace cgn::ctl
