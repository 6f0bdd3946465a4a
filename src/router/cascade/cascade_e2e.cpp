// The streaming cascade end to end (label e2e): the real cgn-router with a [router.cascade] alias
// over real cgn-engine-sim processes serving a cheap model ("small") and an expensive one
// ("large") on loopback. The small model's confidence is steered per prompt through the
// simulator's rule file (`prompt:MARKER confidence=F`): 0.9 by default (token logprob ln 0.9 =
// -0.105, above the -0.5 threshold: accepted), 0.2 for prompts with "unsure" (ln 0.2 = -1.61:
// escalated). Synchronised on observable state, never on sleeps.
#include <gtest/gtest.h>

#include <csignal>
#include <set>

#include "router/e2e_testing.h"

namespace cgn::router::e2e {
namespace {

constexpr const char* kCascadeToml = R"(
[router.cascade.aliases.auto]
deadline_reserve_ms = 250
[[router.cascade.aliases.auto.steps]]
model = "small"
statistic = "mean"
threshold = -0.5
[[router.cascade.aliases.auto.steps]]
model = "large"
)";

constexpr const char* kSmallRules =
    "prompt:unsure confidence=0.2\n"
    "prompt:slowpoke slow_start=5s\n";

std::vector<std::string> sim_flags(const TempDir& dir, const std::string& served, const std::string& rules,
                                   std::vector<std::string> more = {}) {
  std::vector<std::string> f = {"--served-model-name", served, "--time-scale", "0.1"};
  if (!rules.empty()) {
    const auto r = fault_rules_flags(dir, rules);
    f.insert(f.end(), r.begin(), r.end());
  }
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

std::string ask(const std::string& content, bool stream = false, const json& extra = json::object()) {
  json j = {{"model", "auto"},
            {"messages", json::array({{{"role", "user"}, {"content", content}}})},
            {"max_tokens", 8},
            {"ignore_eos", true}};
  if (stream) {
    j["stream"] = true;
  }
  j.update(extra);
  return j.dump();
}

// The text of a chat stream's content deltas, and the models its chunks name.
std::string streamed_text(const Reply& r, std::set<std::string>& models) {
  std::string text;
  for (const auto& e : r.events) {
    if (e == "[DONE]") {
      continue;
    }
    const json c = json::parse(e, nullptr, false);
    if (!c.is_object() || !c.contains("choices")) {
      continue;
    }
    models.insert(c.value("model", ""));
    for (const auto& ch : c["choices"]) {
      if (ch.contains("delta") && ch["delta"].contains("content") && ch["delta"]["content"].is_string()) {
        text += ch["delta"]["content"].get<std::string>();
      }
    }
  }
  return text;
}

std::string steps_series(int step, const char* outcome) {
  return "cgn_router_cascade_steps_total{alias=\"auto\",step=\"" + std::to_string(step) + "\",outcome=\"" +
         outcome + "\"}";
}

struct Cascade {
  TempDir dir_small, dir_large;
  Sim small{"small", sim_flags(dir_small, "small", kSmallRules)};
  Sim large{"large", sim_flags(dir_large, "large", "")};
  Router router{
      {NodeSpec{"small", small.port, "both", "small"}, NodeSpec{"large", large.port, "both", "large"}},
      kCascadeToml};
  double requests(const char* model) {
    return router.count("cgn_router_requests_total{model=\"" + std::string(model) +
                        "\",endpoint=\"chat\",code=\"200\"}");
  }
};

// Two nodes of each model, so a step's routing has a choice to get right.
struct TwoNodesPerModel {
  explicit TwoNodesPerModel(const std::string& extra_toml = "")
      : router({NodeSpec{"small-a", small_a.port, "both", "small"},
                NodeSpec{"small-b", small_b.port, "both", "small"},
                NodeSpec{"large-a", large_a.port, "both", "large"},
                NodeSpec{"large-b", large_b.port, "both", "large"}},
               extra_toml + kCascadeToml) {}
  // A request naming `model` itself, not the alias.
  Reply direct(const std::string& model, const std::string& content) const {
    return post(router.port, "/v1/chat/completions", ask(content, false, {{"model", model}}));
  }
  TempDir d1, d2, d3, d4;
  Sim small_a{"small-a", sim_flags(d1, "small", kSmallRules)};
  Sim small_b{"small-b", sim_flags(d2, "small", kSmallRules)};
  Sim large_a{"large-a", sim_flags(d3, "large", "")};
  Sim large_b{"large-b", sim_flags(d4, "large", "")};
  Router router;
};

// The small model served disaggregated (a prefill and a decode node), the large one aggregated.
struct PdCascade {
  explicit PdCascade(const std::string& extra_toml = "")
      : router(
            {NodeSpec{"small-p", sp.port, "prefill", "small"},
             NodeSpec{"small-d", sd.port, "decode", "small"}, NodeSpec{"large", large.port, "both", "large"}},
            std::string(kCascadeToml) + extra_toml) {}
  TempDir dir_p, dir_d, dir_large;
  Sim sp{"small-p", sim_flags(dir_p, "small", kSmallRules)};
  Sim sd{"small-d", sim_flags(dir_d, "small", kSmallRules)};
  Sim large{"large", sim_flags(dir_large, "large", "")};
  Router router;
};

TEST(CascadeE2E, AConfidentCheapAnswerIsAcceptedAtStepOneBufferedAndStreamed) {
  Cascade c;
  const Reply buffered = post(c.router.port, "/v1/chat/completions", ask("what is two plus two"));
  ASSERT_EQ(buffered.status, 200u) << buffered.body;
  EXPECT_EQ(buffered.header("X-CGN-Cascade-Step"), "1");
  EXPECT_EQ(buffered.header("X-CGN-Node"), "small");
  const json b = buffered.json_body();
  EXPECT_EQ(b["model"], "small");
  EXPECT_FALSE(b["choices"][0]["message"]["content"].get<std::string>().empty());
  EXPECT_TRUE(b["choices"][0]["logprobs"].is_null()) << "the client did not ask for logprobs";

  // Asked for: they stay.
  const Reply with =
      post(c.router.port, "/v1/chat/completions", ask("two plus three", false, {{"logprobs", true}}));
  ASSERT_EQ(with.status, 200u) << with.body;
  EXPECT_EQ(with.json_body()["choices"][0]["logprobs"]["content"].size(), 8u);

  const Reply streamed =
      stream(c.router.port, "/v1/chat/completions",
             ask("what is three plus three", true, {{"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(streamed.status, 200u) << streamed.body << streamed.error;
  EXPECT_EQ(streamed.header("X-CGN-Cascade-Step"), "1");
  EXPECT_NE(streamed.header("Content-Type").find("text/event-stream"), std::string::npos);
  ASSERT_GE(streamed.events.size(), 4u);
  EXPECT_EQ(streamed.events.back(), "[DONE]");
  std::set<std::string> models;
  EXPECT_FALSE(streamed_text(streamed, models).empty());
  EXPECT_EQ(models, std::set<std::string>{"small"});
  // Re-chunked per token: the role chunk, 8 tokens, the finish chunk, the usage chunk, [DONE].
  EXPECT_EQ(streamed.events.size(), 12u);
  const json usage = json::parse(streamed.events[streamed.events.size() - 2]);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 8);

  EXPECT_EQ(c.router.metric(steps_series(1, "accepted")), 3.0);
  EXPECT_EQ(c.requests("large"), 0.0) << "the large model saw nothing";
  EXPECT_EQ(c.requests("small"), 3.0);
  EXPECT_EQ(c.router.metric("cgn_router_cascade_gate_seconds_count{alias=\"auto\"}"), 3.0);
}

TEST(CascadeE2E, AnUnsureCheapAnswerEscalatesToTheLargeModelWhichStreamsLive) {
  Cascade c;
  const Reply streamed = stream(c.router.port, "/v1/chat/completions", ask("an unsure question", true));
  ASSERT_EQ(streamed.status, 200u) << streamed.body << streamed.error;
  EXPECT_EQ(streamed.header("X-CGN-Cascade-Step"), "2");
  EXPECT_EQ(streamed.header("X-CGN-Node"), "large");
  EXPECT_EQ(streamed.events.back(), "[DONE]");
  std::set<std::string> models;
  EXPECT_FALSE(streamed_text(streamed, models).empty());
  EXPECT_EQ(models, std::set<std::string>{"large"});
  // The engine's own chunks, relayed: one per token plus the role and finish chunks.
  EXPECT_GE(streamed.events.size(), 9u);

  const Reply buffered = post(c.router.port, "/v1/chat/completions", ask("another unsure question"));
  ASSERT_EQ(buffered.status, 200u) << buffered.body;
  EXPECT_EQ(buffered.header("X-CGN-Cascade-Step"), "2");
  EXPECT_EQ(buffered.json_body()["model"], "large");

  EXPECT_EQ(c.router.metric(steps_series(1, "escalated")), 2.0);
  EXPECT_EQ(c.router.metric(steps_series(2, "accepted")), 2.0);
  EXPECT_EQ(c.router.metric("cgn_router_cascade_gate_seconds_count{alias=\"auto\"}"), 2.0);
  EXPECT_EQ(c.requests("large"), 2.0);
  EXPECT_EQ(c.router.count(steps_series(1, "accepted")), 0.0);
}

TEST(CascadeE2E, RequestsWithToolsGoStraightToTheLastStep) {
  Cascade c;
  const json tools = json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"}, {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}}});
  const Reply rep =
      post(c.router.port, "/v1/chat/completions", ask("weather in Paris", false, {{"tools", tools}}));
  ASSERT_EQ(rep.status, 200u) << rep.body;
  EXPECT_EQ(rep.header("X-CGN-Cascade-Step"), "2");
  EXPECT_EQ(rep.header("X-CGN-Node"), "large");
  EXPECT_EQ(c.router.metric(steps_series(1, "skipped")), 1.0);
  EXPECT_EQ(c.requests("small"), 0.0) << "the small model never saw the tool request";
  EXPECT_EQ(c.router.count("cgn_router_cascade_gate_seconds_count{alias=\"auto\"}"), 0.0);
}

TEST(CascadeE2E, ACheapStepFailsOverToAnotherCheapNode) {
  TempDir d1, d2, d3;
  Sim faulty("small-faulty", sim_flags(d1, "small", "", {"--fault", "error=503"}));
  Sim good("small-good", sim_flags(d2, "small", kSmallRules));
  Sim large("large", sim_flags(d3, "large", ""));
  Router r(
      {NodeSpec{"small-faulty", faulty.port, "both", "small"},
       NodeSpec{"small-good", good.port, "both", "small"}, NodeSpec{"large", large.port, "both", "large"}},
      kCascadeToml);
  for (int i = 0; i < 10; ++i) {
    const bool streamed = i % 2 == 1;
    const std::string body = ask("easy question " + long_text(40, i), streamed);
    const Reply rep =
        streamed ? stream(r.port, "/v1/chat/completions", body) : post(r.port, "/v1/chat/completions", body);
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Cascade-Step"), "1");
    EXPECT_EQ(rep.header("X-CGN-Node"), "small-good");
  }
  // The faulty node was ranked first now and then (ties break at random); each time the step
  // moved to the good one.
  EXPECT_GT(r.metric("cgn_router_retries_total{model=\"small\",reason=\"status_5xx\"}"), 0.0);
  EXPECT_EQ(r.metric(steps_series(1, "accepted")), 10.0);
  EXPECT_EQ(r.count(steps_series(1, "failed")), 0.0);

  // Every cheap node failing is a failed step, and the large model serves.
  faulty.process().signal(SIGKILL);
  good.process().signal(SIGKILL);
  ASSERT_TRUE(wait_until(
      [&] {
        const json h = json::parse(get(r.port, "/health").body, nullptr, false);
        return h.is_object() && h["nodes_healthy"] == 1;
      },
      20s));
  const Reply rep = post(r.port, "/v1/chat/completions", ask("easy question, no cheap node"));
  ASSERT_EQ(rep.status, 200u) << rep.body;
  EXPECT_EQ(rep.header("X-CGN-Cascade-Step"), "2");
  EXPECT_EQ(r.metric(steps_series(1, "skipped")), 1.0) << "no cheap node left to rank";
}

TEST(CascadeE2E, ADeadlineCutsOffASlowCheapStepOrSkipsIt) {
  Cascade c;
  // The small model holds "slowpoke" prompts 5 s (x0.1 time scale does not apply to slow_start).
  // With 1500 ms to the first token and 250 ms reserved for the large model, the small step is
  // cut off (failed) and the large one serves well before the small one would have answered.
  const auto t0 = std::chrono::steady_clock::now();
  const Reply cut =
      post(c.router.port, "/v1/chat/completions", ask("slowpoke question"), {{"X-CGN-Deadline-Ms", "1500"}});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(cut.status, 200u) << cut.body;
  EXPECT_EQ(cut.header("X-CGN-Cascade-Step"), "2");
  EXPECT_LT(took, 4.5) << "the small step was not cut off";
  EXPECT_EQ(c.router.metric(steps_series(1, "failed")), 1.0);

  // A budget below the reserve: no time for the small step at all; it is skipped.
  const Reply skipped = stream(c.router.port, "/v1/chat/completions", ask("quick question", true),
                               {{"X-CGN-Deadline-Ms", "200"}});
  ASSERT_EQ(skipped.status, 200u) << skipped.body;
  EXPECT_EQ(skipped.header("X-CGN-Cascade-Step"), "2");
  EXPECT_EQ(skipped.events.back(), "[DONE]");
  EXPECT_EQ(c.router.metric(steps_series(1, "skipped")), 1.0);
}

// A deadline even the last step cannot meet fails clearly: 429 deadline_exceeded (an OpenAI
// rate_limit_error) with Retry-After, the gated step skipped, the last step failed, and neither
// model's engine sees the request. Two ways there: the budget is spent before the last step
// starts (1 ms: nothing is left once the skipped step is behind it), and the large model's
// estimated time to first token exceeds what is left (1000 ms per uncached block of prompt).
TEST(CascadeE2E, ADeadlineTheLastStepCannotMeetEitherIsRefusedWith429) {
  TempDir dir_small, dir_large;
  Sim small{"small", sim_flags(dir_small, "small", kSmallRules)};
  Sim large{"large", sim_flags(dir_large, "large", "")};
  Router r({NodeSpec{"small", small.port, "both", "small"}, NodeSpec{"large", large.port, "both", "large"}},
           std::string(kCascadeToml) +
               "[router.admission]\nretry_after_s = 7\n"
               "[router.routing.weights]\nprefill_ms_per_block = 1000\n");
  const auto refused = [&](const Reply& rep, bool streamed, const std::string& why) {
    ASSERT_EQ(rep.status, 429u) << rep.body << rep.error;
    EXPECT_EQ(rep.header("Retry-After"), "7");
    EXPECT_EQ(rep.header("X-CGN-Cascade-Step"), "2") << "a refusal names the last step";
    EXPECT_FALSE(rep.header("X-Request-Id").empty());
    EXPECT_NE(rep.header("Content-Type").find("application/json"), std::string::npos);
    const json e = rep.json_body();
    ASSERT_TRUE(e.is_object() && e.contains("error")) << rep.body;
    EXPECT_EQ(e["error"]["type"], "rate_limit_error") << rep.body;
    EXPECT_EQ(e["error"]["code"], "deadline_exceeded") << rep.body;
    EXPECT_NE(e["error"]["message"].get<std::string>().find(why), std::string::npos) << rep.body;
    EXPECT_TRUE(rep.events.empty()) << "streamed " << streamed << ": no stream began";
  };
  // The budget is gone before the last step starts.
  const Reply spent =
      post(r.port, "/v1/chat/completions", ask("quick question"), {{"X-CGN-Deadline-Ms", "1"}});
  refused(spent, false, "earlier steps used the X-CGN-Deadline-Ms budget of 1 ms");
  // 2 s is plenty for a short prompt, but this one is 16 blocks: an estimated 16 s to first token.
  const Reply slow =
      stream(r.port, "/v1/chat/completions", ask(long_text(1100, 1), true), {{"X-CGN-Deadline-Ms", "2000"}});
  refused(slow, true, "exceeds the X-CGN-Deadline-Ms budget");

  EXPECT_EQ(r.metric(steps_series(1, "skipped")), 2.0);
  EXPECT_EQ(r.metric(steps_series(2, "failed")), 2.0);
  EXPECT_EQ(r.metric("cgn_router_admission_rejections_total{model=\"large\",reason=\"deadline\"}"), 2.0);
  EXPECT_EQ(r.metric("cgn_router_requests_total{model=\"large\",endpoint=\"chat\",code=\"429\"}"), 2.0);
  EXPECT_EQ(r.count("cgn_router_cascade_gate_seconds_count{alias=\"auto\"}"), 0.0) << "no gated step ran";
  EXPECT_EQ(r.count(steps_series(2, "accepted")), 0.0);
  for (const char* model : {"small", "large"}) {
    EXPECT_EQ(r.count("cgn_router_requests_total{model=\"" + std::string(model) +
                      "\",endpoint=\"chat\",code=\"200\"}"),
              0.0)
        << model << " served nothing";
  }

  // Without a deadline the same prompt is served: the refusal was the deadline's.
  const Reply served = post(r.port, "/v1/chat/completions", ask(long_text(1100, 1)));
  ASSERT_EQ(served.status, 200u) << served.body;
}

// Each step routes by its own model's prefix digests (the seed names the model, so the alias's
// would match nothing an engine of the step's model holds): a prompt a node of "small" (or
// "large") served directly is sent through the cascade to that node, and one the cascade served
// first is found there by a direct request for the step's model.
TEST(CascadeE2E, EachStepRoutesByItsOwnModelsPrefixDigests) {
  TwoNodesPerModel c;
  Router& r = c.router;
  const auto direct = [&](const std::string& model, const std::string& content) {
    return c.direct(model, content);
  };
  for (int i = 0; i < 6; ++i) {
    // Step 1 (accepted) after a direct request for "small", and a direct one after the cascade.
    const std::string easy = long_text(600, 10 + i);
    const Reply first = direct("small", easy);
    ASSERT_EQ(first.status, 200u) << first.body;
    const Reply via = post(r.port, "/v1/chat/completions", ask(easy));
    ASSERT_EQ(via.status, 200u) << via.body;
    EXPECT_EQ(via.header("X-CGN-Cascade-Step"), "1");
    EXPECT_EQ(via.header("X-CGN-Node"), first.header("X-CGN-Node")) << i << ": the prefix lives there";
    const std::string easy2 = long_text(600, 100 + i);
    const Reply cascaded = post(r.port, "/v1/chat/completions", ask(easy2));
    ASSERT_EQ(cascaded.status, 200u) << cascaded.body;
    const Reply after = direct("small", easy2);
    ASSERT_EQ(after.status, 200u) << after.body;
    EXPECT_EQ(after.header("X-CGN-Node"), cascaded.header("X-CGN-Node")) << i;

    // The last step (escalated) after a direct request for "large".
    const std::string hard = "unsure " + long_text(600, 200 + i);
    const Reply large_first = direct("large", hard);
    ASSERT_EQ(large_first.status, 200u) << large_first.body;
    const Reply escalated = post(r.port, "/v1/chat/completions", ask(hard));
    ASSERT_EQ(escalated.status, 200u) << escalated.body;
    EXPECT_EQ(escalated.header("X-CGN-Cascade-Step"), "2");
    EXPECT_EQ(escalated.header("X-CGN-Node"), large_first.header("X-CGN-Node")) << i;
  }
}

// The admin explain endpoint explains a cascade alias step by step, each with its own model's
// digests, and names the nodes the gateway then uses: the first step's for an accepted prompt,
// the last step's for an escalated one.
TEST(CascadeE2E, ExplainShowsEachStepsOwnDecision) {
  constexpr const char* kAdminKey = "cascade-explain-admin-key-0123";
  ::setenv("CGN_TEST_CASCADE_ADMIN_KEY", kAdminKey, 1);
  TwoNodesPerModel c("[router.admin]\nkey_env = \"CGN_TEST_CASCADE_ADMIN_KEY\"\n");
  Router& r = c.router;
  const Headers admin = {{"Authorization", std::string("Bearer ") + kAdminKey}};
  const auto explain = [&](const std::string& body, const std::string& endpoint = "chat") {
    const Reply e = post(r.port, "/admin/v1/routes/explain?endpoint=" + endpoint, body, admin);
    return std::make_pair(e.status, json::parse(e.body, nullptr, false));
  };
  const auto direct = [&](const std::string& model, const std::string& content) {
    return c.direct(model, content);
  };
  for (const bool hard : {false, true}) {
    // Each model's prefix lives on one of its nodes: a direct request put it there.
    const std::string prompt = (hard ? "unsure " : "") + long_text(600, hard ? 301 : 300);
    const Reply small_first = direct("small", prompt);
    const Reply large_first = direct("large", prompt);
    ASSERT_EQ(small_first.status, 200u) << small_first.body;
    ASSERT_EQ(large_first.status, 200u) << large_first.body;

    const auto [status, j] = explain(ask(prompt));
    ASSERT_EQ(status, 200u) << j.dump();
    ASSERT_TRUE(j.contains("cascade")) << j.dump();
    EXPECT_EQ(j["cascade"]["alias"], "auto");
    const json& steps = j["cascade"]["steps"];
    ASSERT_EQ(steps.size(), 2u) << j.dump();
    EXPECT_EQ(steps[0]["model"], "small");
    EXPECT_EQ(steps[0]["gated"], true);
    EXPECT_EQ(steps[1]["model"], "large");
    EXPECT_EQ(steps[1]["gated"], false);
    EXPECT_EQ(steps[0]["chosen"], small_first.header("X-CGN-Node")) << steps[0].dump();
    EXPECT_EQ(steps[1]["chosen"], large_first.header("X-CGN-Node")) << steps[1].dump();
    EXPECT_EQ(j["chosen"], steps[0]["chosen"]) << "the top level is the first step's decision";
    // A step's digests are those of a request for its model.
    const auto [small_status, small_j] = explain(ask(prompt, false, {{"model", "small"}}));
    ASSERT_EQ(small_status, 200u);
    EXPECT_EQ(steps[0]["digests"], small_j["digests"]);
    EXPECT_NE(steps[0]["digests"], steps[1]["digests"]) << "the seed names the model";

    // The cascade then goes where the explain said.
    const Reply served = post(r.port, "/v1/chat/completions", ask(prompt));
    ASSERT_EQ(served.status, 200u) << served.body;
    EXPECT_EQ(served.header("X-CGN-Cascade-Step"), hard ? "2" : "1");
    EXPECT_EQ(served.header("X-CGN-Node"), steps[hard ? 1 : 0]["chosen"]);
  }
  // cgn-ctl shows each step's table.
  Process ctl({bin_path("cgn-ctl"), "--router", "http://127.0.0.1:" + std::to_string(r.port),
               "--admin-key-env", "CGN_TEST_CASCADE_ADMIN_KEY", "routes", "explain", "--model", "auto",
               "--prompt", "hello there"});
  ASSERT_EQ(ctl.wait(20s), 0) << ctl.log();
  const std::string human = ctl.log();
  EXPECT_NE(human.find("cascade auto: 2 step(s)"), std::string::npos) << human;
  EXPECT_NE(human.find("step 1 (gated):"), std::string::npos) << human;
  EXPECT_NE(human.find("step 2 (last):"), std::string::npos) << human;
  EXPECT_NE(human.find("model small,"), std::string::npos) << human;
  EXPECT_NE(human.find("model large,"), std::string::npos) << human;
  // A cascade is not served on /v1/embeddings or /v1/responses, and its explain says so.
  const auto [emb_status, emb] = explain(json{{"model", "auto"}, {"input", "hello"}}.dump(), "embeddings");
  EXPECT_EQ(emb_status, 400u) << emb.dump();
  EXPECT_EQ(emb["error"]["code"], "model_not_supported") << emb.dump();
}

// A gated step on a model served disaggregated runs as its model's requests do: the prefill leg
// on the prefill node, the decode leg on the decode node (which pulls the prompt's KV from the
// prefill node), the decode node's answer held and judged. The simulator's counters say where
// each leg ran.
TEST(CascadeE2E, AGatedStepOfADisaggregatedModelRunsPrefillThenDecode) {
  PdCascade c;
  Sim &sp = c.sp, &sd = c.sd;
  Router& r = c.router;
  // Prompts that share nothing: the decode node never has a local hit to use instead of a pull.
  const Reply buffered = post(r.port, "/v1/chat/completions", ask(long_text(1000, 1)));
  ASSERT_EQ(buffered.status, 200u) << buffered.body;
  EXPECT_EQ(buffered.header("X-CGN-Cascade-Step"), "1");
  EXPECT_EQ(buffered.header("X-CGN-Node"), "small-d");
  EXPECT_EQ(buffered.header("X-CGN-Prefill-Node"), "small-p");
  EXPECT_EQ(buffered.json_body()["model"], "small");
  EXPECT_EQ(buffered.json_body()["usage"]["completion_tokens"], 8) << "the decode node's whole answer";

  const Reply streamed = stream(r.port, "/v1/chat/completions", ask(long_text(1000, 2), true));
  ASSERT_EQ(streamed.status, 200u) << streamed.body << streamed.error;
  EXPECT_EQ(streamed.header("X-CGN-Cascade-Step"), "1");
  EXPECT_EQ(streamed.header("X-CGN-Node"), "small-d");
  EXPECT_EQ(streamed.header("X-CGN-Prefill-Node"), "small-p");
  EXPECT_EQ(streamed.events.back(), "[DONE]");

  // The decode node's answer is the one judged: an unsure one escalates to the large model.
  const Reply escalated = post(r.port, "/v1/chat/completions", ask("unsure " + long_text(1000, 3)));
  ASSERT_EQ(escalated.status, 200u) << escalated.body;
  EXPECT_EQ(escalated.header("X-CGN-Cascade-Step"), "2");
  EXPECT_EQ(escalated.header("X-CGN-Node"), "large");

  const json ps = sp.state(), ds = sd.state();
  EXPECT_EQ(ps["kv_handoffs_claimed"], 3) << ps.dump();
  EXPECT_EQ(ps["held_handoffs"], 0) << ps.dump();
  EXPECT_EQ(ds["kv_pulls_ok"], 3) << ds.dump();
  EXPECT_EQ(ds["kv_pulls_failed"], 0) << ds.dump();
  EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"small\",leg=\"prefill\",outcome=\"handoff\"}"), 3.0);
  EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"small\",leg=\"decode\",outcome=\"pull\"}"), 3.0);
  EXPECT_EQ(r.metric(steps_series(1, "accepted")), 2.0);
  EXPECT_EQ(r.metric(steps_series(1, "escalated")), 1.0);
}

// With the prefill node gone, a disaggregated gated step follows [router.disaggregation]
// fallback: "aggregated" (the default) lets the decode node compute the prompt itself and the
// step is judged as usual; "reject" fails the step and the next one serves.
TEST(CascadeE2E, ADisaggregatedGatedStepWithoutAPrefillNodeFollowsTheFallback) {
  for (const bool reject : {false, true}) {
    PdCascade c(reject ? "[router.disaggregation]\nfallback = \"reject\"\n" : "");
    Sim &sp = c.sp, &sd = c.sd;
    Router& r = c.router;
    sp.process().signal(SIGKILL);
    ASSERT_TRUE(wait_until(
        [&] {
          const json h = json::parse(get(r.port, "/health").body, nullptr, false);
          return h.is_object() && h["nodes_healthy"] == 2;
        },
        20s));
    const Reply rep = post(r.port, "/v1/chat/completions", ask(long_text(500, reject ? 2 : 1)));
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "") << reject;
    EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"small\",leg=\"prefill\",outcome=\"no_node\"}"), 1.0);
    if (reject) {
      EXPECT_EQ(rep.header("X-CGN-Cascade-Step"), "2");
      EXPECT_EQ(rep.header("X-CGN-Node"), "large");
      EXPECT_EQ(r.metric(steps_series(1, "failed")), 1.0);
      EXPECT_EQ(r.count("cgn_router_pd_legs_total{model=\"small\",leg=\"decode\",outcome=\"fallback\"}"),
                0.0);
    } else {
      EXPECT_EQ(rep.header("X-CGN-Cascade-Step"), "1");
      EXPECT_EQ(rep.header("X-CGN-Node"), "small-d");
      EXPECT_EQ(r.metric(steps_series(1, "accepted")), 1.0);
      EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"small\",leg=\"decode\",outcome=\"fallback\"}"),
                1.0);
      EXPECT_EQ(sd.state()["kv_pulls_ok"], 0) << "nothing to pull: decode computed the prompt";
    }
  }
}

TEST(CascadeE2E, TheAliasIsRefusedOnEndpointsACascadeDoesNotServe) {
  Cascade c;
  const Reply rep = post(c.router.port, "/v1/embeddings", R"({"model":"auto","input":"x"})");
  EXPECT_EQ(rep.status, 400u) << rep.body;
  EXPECT_EQ(rep.json_body()["error"]["code"], "model_not_supported") << rep.body;
  EXPECT_EQ(rep.json_body()["error"]["param"], "model") << rep.body;
}

}  // namespace
}  // namespace cgn::router::e2e
