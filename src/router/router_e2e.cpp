// cgn-router end to end (label e2e): the real cgn-router binary (--config, --port-file) in front
// of real cgn-engine-sim processes (vLLM flavour, --port 0 --port-file) on loopback. What the
// simulator adds over gateway_itest's in-process fake engine: real prefix caching (the engine
// reports cached tokens), real vLLM /metrics scraped by the router, a process that is SIGKILLed
// with requests in flight, the engine's own fault injection (--fault, --fault-rules) and error
// bodies, and the engine seeing a cancelled request. Synchronised on observable state (the sims'
// /admin/state and /metrics, the router's /health and /metrics), never on sleeps; assertions on
// time use none.
#include <gtest/gtest.h>

#include <csignal>
#include <future>
#include <map>

#include "router/e2e_testing.h"

namespace cgn::router::e2e {
namespace {

// ---- routing -------------------------------------------------------------------------------

TEST(RouterE2E, ALongSharedPrefixStaysOnOneNodeAndTheEngineReportsItCached) {
  Sim a("a", {"--time-scale", "0.05"}), b("b", {"--time-scale", "0.05"}), c("c", {"--time-scale", "0.05"});
  Router r({&a, &b, &c});
  const std::string prefix = long_text(4000, 1);
  std::string node;
  for (int i = 0; i < 6; ++i) {
    const Reply rep = post(r.port, "/v1/chat/completions", chat(prefix + "\nquestion " + std::to_string(i)));
    ASSERT_EQ(rep.status, 200u) << rep.body;
    const int cached = rep.json_body()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    EXPECT_EQ(rep.header("X-Sim-Cached-Tokens"), std::to_string(cached));
    if (i == 0) {
      node = rep.header("X-CGN-Node");
      EXPECT_EQ(cached, 0);
    } else {
      EXPECT_EQ(rep.header("X-CGN-Node"), node) << "request " << i;
      EXPECT_GE(cached, 3900) << "request " << i;
    }
  }
  EXPECT_GT(r.metric("cgn_router_prefix_overlap_ratio_sum"), 4.0);
}

TEST(RouterE2E, DifferentPrefixesSpreadOverTheNodes) {
  Sim a("a", {"--time-scale", "0.05"}), b("b", {"--time-scale", "0.05"}), c("c", {"--time-scale", "0.05"});
  Router r({&a, &b, &c});
  std::map<std::string, int> per_node;
  for (int i = 0; i < 30; ++i) {
    const Reply rep = post(r.port, "/v1/chat/completions", chat(long_text(500, 100 + i)));
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_EQ(rep.json_body()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    per_node[rep.header("X-CGN-Node")]++;
  }
  ASSERT_EQ(per_node.size(), 3u);
  for (const auto& [node, n] : per_node) {
    EXPECT_GE(n, 3) << node;
  }
}

TEST(RouterE2E, AFarBusierNodeIsAvoidedDespiteItsOverlap) {
  Sim a("a", {"--max-num-seqs", "2"}), b("b", {"--max-num-seqs", "2"});
  Router r({&a, &b});
  const std::string prefix = long_text(4000, 2);
  const Reply warm = post(r.port, "/v1/chat/completions", chat(prefix + "\nwarm"));
  ASSERT_EQ(warm.status, 200u) << warm.body;
  const std::string holder_name = warm.header("X-CGN-Node");
  Sim& holder = holder_name == "a" ? a : b;
  // Load the holder behind the router's back: 2 running, 18 waiting (vllm:num_requests_waiting).
  std::vector<std::unique_ptr<RawConn>> load;
  for (int i = 0; i < 20; ++i) {
    load.push_back(std::make_unique<RawConn>(holder.port, "/v1/chat/completions",
                                             chat(long_text(50, 200 + i), 100000, true)));
  }
  ASSERT_TRUE(wait_until([&] { return holder.running() == 20; }, 10s));
  // The router learns it from the holder's /metrics (its cluster mirror shows what it scraped).
  ASSERT_TRUE(wait_until(
      [&] { return r.metric("cgn_cluster_node_queue_depth{node=\"" + holder_name + "\"}") >= 18; }, 15s));
  for (int i = 0; i < 4; ++i) {
    const Reply rep = post(r.port, "/v1/chat/completions", chat(prefix + "\nq" + std::to_string(i)));
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_NE(rep.header("X-CGN-Node"), holder_name) << i;
  }
  load.clear();
  // The holder's engine sees the clients go and frees its seats.
  EXPECT_TRUE(wait_until([&] { return holder.running() == 0; }, 10s));
}

// ---- failures ------------------------------------------------------------------------------

TEST(RouterE2E, AKilledNodesInFlightRequestsAreRetriedAndItsTrafficMoves) {
  // The victim prefills slowly (time scale 20: a 2,000-token prompt takes seconds before its
  // first token), so requests sit in it, unanswered, when it is SIGKILLed.
  Sim victim("victim", {"--time-scale", "20"}), survivor("survivor", {"--time-scale", "0.05"});
  Router r({&victim, &survivor});
  std::vector<std::future<Reply>> inflight;
  for (int i = 0; i < 8; ++i) {
    inflight.push_back(std::async(std::launch::async, [&r, i] {
      return stream(r.port, "/v1/chat/completions", chat(long_text(2000, 300 + i), 4, true));
    }));
  }
  ASSERT_TRUE(wait_until([&] { return victim.running() > 0; }, 10s));
  const int at_victim = victim.running();
  victim.process().signal(SIGKILL);
  for (auto& f : inflight) {
    const Reply rep = f.get();
    ASSERT_EQ(rep.status, 200u) << rep.error << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Node"), "survivor");
    EXPECT_EQ(rep.events.back(), "[DONE]");
  }
  EXPECT_GE(r.metric("cgn_router_retries_total{model=\"m\",reason=\"closed\"}"), at_victim);
  for (int i = 0; i < 4; ++i) {
    const Reply rep = post(r.port, "/v1/chat/completions", chat(long_text(200, 400 + i)));
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Node"), "survivor");
  }
  EXPECT_TRUE(wait_until(
      [&] { return json::parse(get(r.port, "/health").body, nullptr, false)["nodes_healthy"] == 1; }, 10s));
}

TEST(RouterE2E, ARequestThatKillsEveryEngineItReachesTakesDownTwoNodesNotThree) {
  // Every simulator exits on any request: a poisonous prompt. The first close is retried once;
  // the second ends the request, so the third node never sees it.
  Sim a("a", {"--fault", "exit"}), b("b", {"--fault", "exit"}), c("c", {"--fault", "exit"});
  Router r({&a, &b, &c});
  const Reply rep = post(r.port, "/v1/chat/completions", chat(long_text(200, 900)));
  EXPECT_EQ(rep.status, 502u) << rep.body;
  std::vector<Sim*> sims = {&a, &b, &c};
  auto dead = [&] {
    int n = 0;
    for (Sim* s : sims) {
      n += s->process().running() ? 0 : 1;
    }
    return n;
  };
  EXPECT_TRUE(wait_until([&] { return dead() == 2; }, 10s)) << dead();
  EXPECT_EQ(dead(), 2);
  const auto page = get(r.port, "/metrics").body;
  EXPECT_EQ(sample(page, "cgn_router_retries_total{model=\"m\",reason=\"closed\"}"), 1.0);
}

TEST(RouterE2E, EngineFaultsBeforeTheFirstTokenAreRetriedAndTheHeadersNameTheServingNode) {
  Sim f503("f503", {"--time-scale", "0.05", "--fault", "error=503"});
  Sim f429("f429", {"--time-scale", "0.05", "--fault", "error=429"});
  TempDir rules;
  std::vector<std::string> good_flags = fault_rules_flags(rules, "prompt:fail-on-every-node error=503\n");
  good_flags.insert(good_flags.begin(), {"--time-scale", "0.05"});
  Sim good("good", good_flags);
  Router r({&f503, &f429, &good});
  for (int i = 0; i < 12; ++i) {
    const bool streamed = i % 2 == 1;
    const std::string body = chat(long_text(300, 500 + i), 4, streamed);
    const Reply rep =
        streamed ? stream(r.port, "/v1/chat/completions", body) : post(r.port, "/v1/chat/completions", body);
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Node"), "good");
    if (streamed) {
      EXPECT_EQ(rep.events.back(), "[DONE]");
    }
  }
  // Each faulty node was tried first now and then (ties are broken at random), never served, and
  // every one of those attempts was retried.
  const double r503 = r.metric("cgn_router_retries_total{model=\"m\",reason=\"status_5xx\"}");
  const double r429 = r.metric("cgn_router_retries_total{model=\"m\",reason=\"status_429\"}");
  EXPECT_GT(r503, 0.0);
  EXPECT_GT(r429, 0.0);
  EXPECT_EQ(good.finished("length"), 12.0);
  EXPECT_EQ(f503.finished("length") + f429.finished("length"), 0.0);

  // When every node fails (the good node's rule file fails this prompt too), the last engine's
  // own answer goes back, naming the node that gave it.
  const Reply all = post(r.port, "/v1/chat/completions", chat("fail-on-every-node"));
  EXPECT_EQ(all.status, 503u);
  EXPECT_FALSE(all.header("X-CGN-Node").empty());
  EXPECT_EQ(all.json_body()["error"]["code"], 503) << all.body;  // vLLM's integer code
}

TEST(RouterE2E, AMidStreamEngineFailureEndsWithAnErrorEventAndDone) {
  TempDir rules;
  std::vector<std::string> flags = fault_rules_flags(rules, "prompt:drop-after-three drop_after=3\n");
  flags.insert(flags.begin(), {"--time-scale", "0.05"});
  Sim a("a", flags);
  Router r({&a});
  const Reply rep = stream(r.port, "/v1/chat/completions", chat("tell me drop-after-three", 10, true));
  ASSERT_EQ(rep.status, 200u) << rep.body;
  EXPECT_TRUE(rep.error.empty()) << rep.error;
  ASSERT_EQ(rep.events.size(), 5u);  // 3 from the engine, the router's error, [DONE]
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(json::parse(rep.events[i])["object"], "chat.completion.chunk");
  }
  const json err = json::parse(rep.events[3]);
  EXPECT_EQ(err["error"]["type"], "server_error");
  EXPECT_EQ(err["error"]["code"], "upstream_error");
  EXPECT_TRUE(err["error"]["message"].get<std::string>().starts_with("The node 'a' failed mid-stream: "))
      << rep.events[3];
  EXPECT_EQ(rep.events[4], "[DONE]");
  // Tokens had reached the client: never retried.
  EXPECT_EQ(r.count("cgn_router_retries_total{model=\"m\",reason=\"closed\"}"), 0.0);
  EXPECT_EQ(a.finished("length") + a.finished("abort"), 1.0);
}

TEST(RouterE2E, AClientDisconnectCancelsTheEngineRequest) {
  Sim a("a", {"--time-scale", "1"});
  Router r({&a});
  {
    RawConn client(r.port, "/v1/chat/completions", chat("a long story", 100000, true));
    ASSERT_TRUE(client.read_until("data: ", 3, 10s)) << client.received();
    EXPECT_EQ(a.running(), 1);
  }  // the client goes away mid-stream
  EXPECT_TRUE(wait_until([&] { return a.running() == 0; }, 10s));
  EXPECT_EQ(a.finished("abort"), 1.0);
  EXPECT_TRUE(wait_until(
      [&] {
        return r.metric("cgn_router_requests_total{model=\"m\",endpoint=\"chat\",code=\"499\"}") == 1.0;
      },
      10s));
}

// ---- admission and bad input ---------------------------------------------------------------

TEST(RouterE2E, AdmissionAnswers429WithRetryAfterAndReleasesTheSlot) {
  Sim a("a", {"--time-scale", "1"});
  Router r({&a}, "[router.admission]\nmax_queue = 1\nretry_after_s = 2\n");
  {
    RawConn holder(r.port, "/v1/chat/completions", chat("hold", 100000, true));
    ASSERT_TRUE(holder.read_until("data: ", 1, 10s)) << holder.received();
    const Reply rej = post(r.port, "/v1/chat/completions", chat("y"));
    EXPECT_EQ(rej.status, 429u);
    EXPECT_EQ(rej.header("Retry-After"), "2");
    EXPECT_EQ(rej.header("X-CGN-Node"), "");
    EXPECT_EQ(rej.json_body(),
              json::parse(R"({"error":{"message":"Too many requests in flight for model 'm'; )"
                          R"(retry later.","type":"rate_limit_error","param":null,)"
                          R"("code":"queue_full"}})"))
        << rej.body;
  }
  EXPECT_TRUE(
      wait_until([&] { return post(r.port, "/v1/chat/completions", chat("z")).status == 200; }, 10s, 50ms));
  // The rejection above, and any try of the loop that came before the slot was back.
  EXPECT_GE(r.metric("cgn_router_admission_rejections_total{model=\"m\",reason=\"queue_full\"}"), 1.0);
}

struct BadInput {
  const char* name;
  std::string target;
  std::string body;
  Headers headers;
  unsigned status;
  const char* error;  // the exact JSON body
  bool from_engine;   // the router passed it on; the engine's answer is relayed with X-CGN-Node
};

TEST(RouterE2E, BadInputsGetExactErrors) {
  Sim a("a", {"--time-scale", "0.05"});
  Router r({&a}, "[router.limits]\nmax_body_bytes = 65536\nmax_messages = 4\nmax_json_depth = 8\n");
  const std::vector<BadInput> cases = {
      {"malformed json",
       "/v1/chat/completions",
       R"({"model":"m",)",
       {},
       400,
       R"x({"error":{"message":"request body is not valid JSON (The JSON document has an improper structure: )x"
       R"x(missing or superfluous commas, braces, missing keys, etc.)","type":"invalid_request_error",)x"
       R"x("param":null,"code":null}})x",
       false},
      {"unknown model",
       "/v1/chat/completions",
       R"({"model":"nope","messages":[{"role":"user","content":"x"}]})",
       {},
       404,
       R"({"error":{"message":"The model 'nope' does not exist or no node serves it.","type":"not_found_error",)"
       R"("param":"model","code":"model_not_found"}})",
       false},
      {"bad priority",
       "/v1/chat/completions",
       R"({"model":"m","messages":[{"role":"user","content":"x"}]})",
       {{"X-CGN-Priority", "urgent"}},
       400,
       R"({"error":{"message":"'X-CGN-Priority' must be low, normal or high.","type":"invalid_request_error",)"
       R"("param":"X-CGN-Priority","code":null}})",
       false},
  };
  for (const auto& k : cases) {
    const Reply rep = post(r.port, k.target, k.body, k.headers);
    EXPECT_EQ(rep.status, k.status) << k.name << ": " << rep.body;
    EXPECT_EQ(rep.json_body(), json::parse(k.error)) << k.name << ": " << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Node"), k.from_engine ? "a" : "") << k.name;
    EXPECT_FALSE(rep.header("X-Request-Id").empty()) << k.name;
  }
}

}  // namespace
}  // namespace cgn::router::e2e
