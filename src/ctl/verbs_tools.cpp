#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_harness/load/load_cmd.h"
#include "core/version.h"
#include "ctl/verbs.h"

namespace cgn::ctl {

namespace {

struct ExplainArgs {
  std::string prompt;
  std::string file;
  std::string model;
  std::string endpoint = "chat";
};

Result<std::string, int> explain_body(Ctx& ctx, const ExplainArgs& a) {
  if (!a.file.empty()) {
    std::ifstream in(a.file);
    if (!in) {
      return make_error(ctx.fail(kUsage, "cannot read " + a.file), "file");
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  if (a.prompt.empty() || a.model.empty()) {
    return make_error(ctx.fail(kUsage, "routes explain: give --file REQUEST.json, or --prompt and --model"),
                      "args");
  }
  nlohmann::json body = {{"model", a.model}, {"messages", {{{"role", "user"}, {"content", a.prompt}}}}};
  if (a.endpoint == "completions") {
    body = {{"model", a.model}, {"prompt", a.prompt}};
  } else if (a.endpoint == "responses") {
    body = {{"model", a.model}, {"input", a.prompt}};
  }
  return body.dump();
}

std::string explain_human(const nlohmann::json& j) {
  std::string h = fmt::format("policy {} (temperature {:.3f} s), model {}, {} block(s), ~{} prompt tokens\n",
                              j.value("policy", "?"), j.value("temperature_s", 0.0), j.value("model", "?"),
                              j.value("request_blocks", 0), j.value("prompt_tokens", 0));
  const auto& d = j["digests"];
  if (!d.empty()) {
    h += "digests: " + d.front().get<std::string>().substr(0, 16) + "..";
    h += d.size() > 1 ? " .. " + d.back().get<std::string>().substr(0, 16) + ".." : "";
    h += "\n";
  }
  const auto& g = j["guard"];
  h += fmt::format("load guard: {}, {} node(s) guarded out (queue > {:g} or KV > {:g})\n",
                   g.value("enabled", false) ? "on" : "off", g.value("guarded_out", 0),
                   g.value("max_queue_depth", 0.0), g.value("max_kv_used", 0.0));
  std::vector<std::vector<std::string>> t = {
      {"NODE", "OVERLAP", "ENGINE", "RAM", "SSD", "GUESSED", "TTFT_S", "COST", "LOAD", "RANK"}};
  for (const auto& n : j["nodes"]) {
    const auto& o = n["overlap"];
    std::vector<std::string> row = {n["node"].get<std::string>(),
                                    std::to_string(o["blocks"].get<int>()),
                                    std::to_string(o["by_tier"]["engine"].get<int>()),
                                    std::to_string(o["by_tier"]["ram"].get<int>()),
                                    std::to_string(o["by_tier"]["ssd"].get<int>()),
                                    std::to_string(o["guessed"].get<int>())};
    if (n.contains("score")) {
      const auto& s = n["score"];
      row.insert(
          row.end(),
          {fmt::format("{:.4f}", s["ttft_s"].get<double>()), fmt::format("{:.4f}", s["cost"].get<double>()),
           fmt::format("{:.2f}", s["load"].get<double>()), std::to_string(s["rank"].get<int>())});
    } else {
      row.insert(row.end(), {"-", "-", "-", "excluded: " + n["excluded"].get<std::string>()});
    }
    t.push_back(std::move(row));
  }
  h += table(t);
  h += j["chosen"].is_null() ? "chosen: none (" + j["error"].value("message", std::string()) + ")\n"
                             : "chosen: " + j["chosen"].get<std::string>() + "\n";
  return h;
}

// A cascade alias: each step's decision (its own model and digests), the first step's first.
std::string explain_cascade_human(const nlohmann::json& j) {
  const auto& steps = j["cascade"]["steps"];
  std::string h = fmt::format("cascade {}: {} step(s)\n", j["cascade"].value("alias", "?"), steps.size());
  for (const auto& step : steps) {
    h += fmt::format("\nstep {} ({}):\n", step.value("step", 0),
                     step.value("gated", false) ? "gated" : "last");
    h += explain_human(step);
  }
  return h;
}

int explain_verb(Ctx& ctx, const ExplainArgs& a) {
  auto body = explain_body(ctx, a);
  if (!body) {
    return body.error().code;
  }
  const std::string key = env_or_empty(ctx.opt().admin_key_env);
  auto r = ctx.http(ctx.opt().router, "POST", "/admin/v1/routes/explain?endpoint=" + a.endpoint, *body, key);
  if (!r) {
    return r.error().code;
  }
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status != 200 || j.is_discarded()) {
    std::string why = j.is_discarded() ? r->body : j["error"].value("message", r->body);
    if (r->status == 401 || r->status == 403) {
      why += " (cgn-ctl sends the key from $" + ctx.opt().admin_key_env + ")";
    }
    return ctx.fail(r->status == 400 ? kUsage : kFailed,
                    "routes explain: " + std::to_string(r->status) + ": " + why);
  }
  ctx.emit(j, j.contains("cascade") ? explain_cascade_human(j) : explain_human(j));
  return j["chosen"].is_null() ? kFailed : kOk;
}

int bench_verb(Ctx& ctx, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"cgn-ctl bench", "--target", ctx.opt().router};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& s : args) {
    argv.push_back(s.c_str());
  }
  auto opts = bench::parse_load_options(static_cast<int>(argv.size()), argv.data());
  if (!opts) {
    ctx.out() << opts.error().message;
    return opts.error().code == 0 ? kOk : kUsage;
  }
  return bench::run_load_command(*opts) == 0 ? kOk : kFailed;
}

int recipe_verb(Ctx& ctx, const std::string& dir, const std::string& name, const std::string& script) {
  // MODEL/ENGINE/TOPOLOGY (recipes/README.md): '/'-separated segments of letters, digits, '-',
  // '_' and '.', none empty or starting with '.' (no way out of the recipes folder).
  bool ok_name = !name.empty() && name.front() != '/' && name.back() != '/';
  for (size_t i = 0; ok_name && i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    const bool starts_segment = i == 0 || name[i - 1] == '/';
    ok_name = std::isalnum(c) || c == '-' || c == '_' || (c == '.' && !starts_segment) ||
              (c == '/' && !starts_segment);
  }
  if (!ok_name) {
    return ctx.fail(
        kUsage, "recipe name '" + name + "' must be MODEL/ENGINE/TOPOLOGY: letters, digits, '-', '_', '.'");
  }
  const std::filesystem::path path = std::filesystem::path(dir) / name / script;
  if (!std::filesystem::exists(path)) {
    return ctx.fail(kNotFound, "no recipe '" + name + "': " + path.string() + " does not exist");
  }
  const std::string p = path.string();
  // bash: the recipes' scripts source recipes/lib/recipe.sh, which is bash.
  const int code = run_program({"/bin/bash", p});
  if (code < 0) {
    return ctx.fail(kFailed, "cannot run " + p);
  }
  return code == 0 ? kOk : ctx.fail(kFailed, p + " exited with status " + std::to_string(code));
}

}  // namespace

void register_tool_verbs(Registry& r) {
  r.push_back(
      {"routes explain",
       "the router's own decision for a request, as a dry run: digests, overlap by tier, score terms, "
       "guard, the chosen node (needs the admin key)",
       [](CLI::App& cmd) -> VerbRun {
         auto a = std::make_shared<ExplainArgs>();
         cmd.add_option("--prompt", a->prompt, "a user message (with --model)");
         cmd.add_option("--model", a->model, "the model the request names");
         cmd.add_option("--file", a->file, "an OpenAI request body (JSON) instead of --prompt");
         cmd.add_option("--endpoint", a->endpoint, "chat, completions, embeddings or responses")
             ->check(CLI::IsMember({"chat", "completions", "embeddings", "responses"}));
         return [a](Ctx& ctx) { return explain_verb(ctx, *a); };
       }});
  r.push_back({"bench", "drive the load generator (cgn-bench load) against --router and print its summary",
               [](CLI::App& cmd) -> VerbRun {
                 auto extra = std::make_shared<std::vector<std::string>>();
                 cmd.add_option("args", *extra,
                                "cgn-bench load options after --, e.g. -- --workload small --limit 50");
                 return [extra](Ctx& ctx) { return bench_verb(ctx, *extra); };
               }});
  r.push_back({"version", "cgn-ctl's version", [](CLI::App&) -> VerbRun {
                 return [](Ctx& ctx) {
                   ctx.emit({{"version", cgn::version()}}, std::string("cgn-ctl ") + cgn::version() + "\n");
                   return kOk;
                 };
               }});
  for (const bool up : {true, false}) {
    r.push_back({up ? "up" : "down",
                 up ? "start a recipe: runs recipes/NAME/up.sh" : "stop a recipe: runs recipes/NAME/down.sh",
                 [up](CLI::App& cmd) -> VerbRun {
                   auto name = std::make_shared<std::string>();
                   auto dir = std::make_shared<std::string>("recipes");
                   cmd.add_option("recipe", *name, "the recipe's folder name")->required();
                   cmd.add_option("--recipes", *dir, "where the recipes are");
                   return [name, dir, up](Ctx& ctx) {
                     return recipe_verb(ctx, *dir, *name, up ? "up.sh" : "down.sh");
                   };
                 }});
  }
}

}  // namespace cgn::ctl
