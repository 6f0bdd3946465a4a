// Disaggregated prefill/decode end to end (label e2e): the cgn-router binary over
// cgn-engine-sim processes in the roles prefill and decode. The simulator speaks vLLM's
// NixlConnector protocol: the prefill instance holds the prompt's blocks and names them in
// kv_transfer_params, the decode instance claims them from the named instance over its side
// channel (X-Sim-Kv-Pull, /admin/state kv_pulls_ok and kv_handoffs_claimed say what happened).
#include <gtest/gtest.h>

#include <csignal>
#include <future>

#include "router/e2e_testing.h"

namespace cgn::router::e2e {
namespace {

const std::string kFast = "0.05";

TEST(DisaggE2E, ARequestFlowsPrefillThenDecodeAndDecodePullsFromTheNamedPrefillNode) {
  Sim p("p", {"--time-scale", kFast}), d("d", {"--time-scale", kFast});
  Router r({{"p", p.port, "prefill"}, {"d", d.port, "decode"}}, "");
  for (const bool streamed : {true, false}) {
    // Prompts that share nothing: the decode node never has a local hit to use instead of a pull.
    const std::string body = chat(long_text(2000, streamed ? 1 : 5), 8, streamed);
    const Reply rep =
        streamed ? stream(r.port, "/v1/chat/completions", body) : post(r.port, "/v1/chat/completions", body);
    ASSERT_EQ(rep.status, 200u) << rep.body << rep.error;
    EXPECT_EQ(rep.header("X-CGN-Node"), "d");
    EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "p");
    if (streamed) {
      // A stream's headers leave with its first token, before the pull is reported: the
      // decode node's counters below tell.
      ASSERT_GE(rep.events.size(), 3u);
      EXPECT_EQ(rep.events.back(), "[DONE]");
    } else {
      EXPECT_EQ(rep.header("X-Sim-Kv-Pull"), "ok");
      EXPECT_GT(std::atoi(rep.header("X-Sim-Transferred-Tokens").c_str()), 1900);
      EXPECT_EQ(rep.json_body()["choices"][0]["finish_reason"], "length");
      EXPECT_EQ(rep.json_body()["usage"]["completion_tokens"], 8);
      EXPECT_FALSE(rep.json_body().contains("kv_transfer_params") &&
                   rep.json_body()["kv_transfer_params"].is_object() &&
                   rep.json_body()["kv_transfer_params"].value("do_remote_prefill", false));
    }
  }
  // The prefill instance handed both prompts over and holds nothing; the decode instance pulled
  // both and prefilled neither.
  const json ps = p.state(), ds = d.state();
  EXPECT_EQ(ps["kv_handoffs_claimed"], 2);
  EXPECT_EQ(ps["held_handoffs"], 0);
  EXPECT_EQ(ds["kv_pulls_ok"], 2);
  EXPECT_EQ(ds["kv_pulls_failed"], 0);
  EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"m\",leg=\"prefill\",outcome=\"handoff\"}"), 2.0);
  EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"m\",leg=\"decode\",outcome=\"pull\"}"), 2.0);
  EXPECT_EQ(r.metric("cgn_router_pd_handoff_seconds_count"), 2.0);
  EXPECT_EQ(r.metric("cgn_router_requests_total{model=\"m\",endpoint=\"chat\",code=\"200\"}"), 2.0);
}

TEST(DisaggE2E, APrefillNodeWithTheOverlapIsChosenAndDecodeGoesToTheLeastLoaded) {
  Sim p1("p1", {"--time-scale", kFast}), p2("p2", {"--time-scale", kFast});
  Sim d1("d1", {"--time-scale", kFast}), d2("d2", {"--time-scale", kFast});
  Router r({{"p1", p1.port, "prefill"},
            {"p2", p2.port, "prefill"},
            {"d1", d1.port, "decode"},
            {"d2", d2.port, "decode"}},
           "");
  const std::string prefix = long_text(3000, 2);
  const Reply first = post(r.port, "/v1/chat/completions", chat(prefix + "\nq0"));
  ASSERT_EQ(first.status, 200u) << first.body;
  const std::string pnode = first.header("X-CGN-Prefill-Node");
  ASSERT_FALSE(pnode.empty());
  for (int i = 1; i < 5; ++i) {
    const Reply rep = post(r.port, "/v1/chat/completions", chat(prefix + "\nq" + std::to_string(i)));
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), pnode) << i;  // the prefix lives there
    EXPECT_EQ(rep.header("X-Sim-Kv-Pull"), "ok");
  }
  // Load one decode node behind the router's back: the next decode leg goes to the other.
  const std::string dnode = first.header("X-CGN-Node");
  Sim& busy = dnode == "d1" ? d1 : d2;
  std::vector<std::unique_ptr<RawConn>> load;
  for (int i = 0; i < 12; ++i) {
    load.push_back(std::make_unique<RawConn>(busy.port, "/v1/chat/completions",
                                             chat(long_text(50, 100 + i), 100000, true)));
  }
  ASSERT_TRUE(wait_until([&] { return busy.running() == 12; }, 10s));
  ASSERT_TRUE(
      wait_until([&] { return r.metric("cgn_cluster_node_running{node=\"" + dnode + "\"}") >= 12; }, 15s));
  for (int i = 0; i < 3; ++i) {
    const Reply rep = post(r.port, "/v1/chat/completions", chat(prefix + "\nz" + std::to_string(i)));
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_NE(rep.header("X-CGN-Node"), dnode) << i;
  }
}

TEST(DisaggE2E, AStopTokenFirstReturnsNoParamsAndDecodeRecomputes) {
  // Echo mode with an empty last user message: the prefill leg's first token is a stop token.
  Sim p("p", {"--time-scale", kFast, "--mode", "echo"}), d("d", {"--time-scale", kFast});
  Router r({{"p", p.port, "prefill"}, {"d", d.port, "decode"}}, "");
  const json body = {{"model", "m"},
                     {"messages", json::array({{{"role", "system"}, {"content", long_text(1000, 3)}},
                                               {{"role", "user"}, {"content", ""}}})},
                     {"max_tokens", 4}};  // no ignore_eos: the stop token must count
  const Reply rep = post(r.port, "/v1/chat/completions", body.dump());
  ASSERT_EQ(rep.status, 200u) << rep.body;
  EXPECT_EQ(rep.header("X-CGN-Node"), "d");
  EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "p");
  EXPECT_EQ(rep.header("X-Sim-Cached-Tokens"), "0");  // computed on the decode node
  EXPECT_EQ(p.state()["held_handoffs"], 0);
  EXPECT_EQ(d.state()["kv_pulls_ok"], 0);
  EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"m\",leg=\"prefill\",outcome=\"no_params\"}"), 1.0);
  EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"m\",leg=\"decode\",outcome=\"recompute\"}"), 1.0);
}

TEST(DisaggE2E, AnExpiredHandoffMakesDecodeRecompute) {
  // The prefill node gives up its blocks after 200 ms; the decode node holds every request
  // 600 ms before it starts (too slow), so its claim finds the handoff expired.
  Sim p("p", {"--time-scale", kFast, "--kv-abort-timeout", "0.2"});
  Sim d("d", {"--time-scale", kFast, "--fault", "slow_start=600ms"});
  Router r({{"p", p.port, "prefill"}, {"d", d.port, "decode"}}, "");
  const Reply rep = post(r.port, "/v1/chat/completions", chat(long_text(1000, 4), 4));
  ASSERT_EQ(rep.status, 200u) << rep.body;
  EXPECT_EQ(rep.header("X-CGN-Node"), "d");
  EXPECT_EQ(rep.header("X-Sim-Kv-Pull"), "failed");
  EXPECT_EQ(rep.header("X-Sim-Transferred-Tokens"), "0");
  EXPECT_EQ(rep.json_body()["usage"]["completion_tokens"], 4);
  EXPECT_EQ(p.state()["kv_handoffs_expired"], 1);
  EXPECT_EQ(d.state()["kv_pulls_failed"], 1);
}

TEST(DisaggE2E, AKilledPrefillNodesLegIsRetriedOnAnotherPrefillNode) {
  // The victim prefills slowly (time scale 20), so prefill legs sit in it when it is SIGKILLed.
  Sim victim("victim", {"--time-scale", "20"}), p("p", {"--time-scale", kFast}),
      d("d", {"--time-scale", kFast});
  Router r({{"victim", victim.port, "prefill"}, {"p", p.port, "prefill"}, {"d", d.port, "decode"}}, "");
  std::vector<std::future<Reply>> inflight;
  for (int i = 0; i < 6; ++i) {
    inflight.push_back(std::async(std::launch::async, [&r, i] {
      return stream(r.port, "/v1/chat/completions", chat(long_text(2000, 10 + i), 4, true));
    }));
  }
  ASSERT_TRUE(wait_until([&] { return victim.running() > 0; }, 10s));
  victim.process().signal(SIGKILL);
  for (auto& f : inflight) {
    const Reply rep = f.get();
    ASSERT_EQ(rep.status, 200u) << rep.error << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Node"), "d");
    EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "p");
    EXPECT_EQ(rep.events.back(), "[DONE]");
  }
  EXPECT_GE(r.metric("cgn_router_retries_total{model=\"m\",reason=\"closed\"}"), 1.0);
  EXPECT_EQ(p.state()["kv_handoffs_claimed"], 6);
  EXPECT_EQ(d.state()["kv_pulls_ok"], 6);
}

TEST(DisaggE2E, WithNoPrefillNodeTheRequestFallsBackToAggregatedOrGets503) {
  const uint16_t dead = static_cast<uint16_t>(cgn::testing::free_port());  // nothing listens there
  Sim d("d", {"--time-scale", kFast});
  {
    Router r({{"p", dead, "prefill"}, {"d", d.port, "decode"}}, "", 1);
    const Reply rep = post(r.port, "/v1/chat/completions", chat(long_text(500, 20), 4));
    ASSERT_EQ(rep.status, 200u) << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Node"), "d");
    EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "");
    EXPECT_EQ(rep.header("X-Sim-Kv-Pull"), "");
    EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"m\",leg=\"decode\",outcome=\"fallback\"}"), 1.0);
  }
  Router r({{"p", dead, "prefill"}, {"d", d.port, "decode"}},
           "[router.disaggregation]\nfallback = \"reject\"\n", 1);
  const Reply rep = post(r.port, "/v1/chat/completions", chat("x"));
  EXPECT_EQ(rep.status, 503u);
  EXPECT_EQ(rep.header("X-CGN-Node"), "");
  EXPECT_EQ(rep.json_body(),
            json::parse(R"({"error":{"message":"No prefill node can serve model 'm' now (all_unhealthy) and )"
                        R"([router.disaggregation] fallback is \"reject\".","type":"server_error",)"
                        R"("param":null,"code":"no_prefill_node"}})"))
      << rep.body;
  EXPECT_EQ(d.finished("length"), 1.0);  // only the fallback request reached the decode node
}

TEST(DisaggE2E, AClientThatLeavesDuringThePrefillLegCancelsItAndNoDecodeLegIsSent) {
  // A slow prefill node (time scale 20: a 6,000-token prompt takes seconds).
  Sim p("p", {"--time-scale", "20"}), d("d", {"--time-scale", kFast});
  Router r({{"p", p.port, "prefill"}, {"d", d.port, "decode"}}, "");
  {
    RawConn client(r.port, "/v1/chat/completions", chat(long_text(6000, 40), 8, true));
    ASSERT_TRUE(wait_until([&] { return p.running() == 1; }, 10s));
  }  // the client walks away mid-prefill
  // The prefill node sees the abort; a leg left to finish would end "length" and hold blocks.
  ASSERT_TRUE(wait_until([&] { return p.finished("abort") + p.finished("length") >= 1.0; }, 30s));
  EXPECT_EQ(p.finished("abort"), 1.0);
  EXPECT_EQ(p.running(), 0);
  EXPECT_EQ(p.state()["held_handoffs"], 0);
  EXPECT_EQ(d.running(), 0);
  EXPECT_EQ(d.finished("length"), 0.0);  // no decode leg
  EXPECT_EQ(r.metric("cgn_router_pd_legs_total{model=\"m\",leg=\"prefill\",outcome=\"cancelled\"}"), 1.0);
  EXPECT_EQ(r.count("cgn_router_pd_legs_total{model=\"m\",leg=\"decode\",outcome=\"pull\"}"), 0.0);
}

TEST(DisaggE2E, AdmissionCapsThePrefillRoleOnItsOwn) {
  // Time scale 10: a 6,000-token prefill takes ~4 s of wall time, so the leg is still held when
  // the second request arrives even on a loaded host (at time scale 1 it was ~0.4 s, and a
  // starved test thread sometimes sent the second request after the first had finished).
  Sim p("p", {"--time-scale", "10"}), d("d", {"--time-scale", kFast});
  Router r({{"p", p.port, "prefill"}, {"d", d.port, "decode"}},
           "[router.admission]\nmax_queue = 10\nretry_after_s = 4\n"
           "[router.admission.models.m]\nprefill_max_queue = 1\n");
  // One prefill leg held in the prefill node.
  auto held = std::async(std::launch::async,
                         [&r] { return post(r.port, "/v1/chat/completions", chat(long_text(6000, 30), 2)); });
  ASSERT_TRUE(wait_until([&] { return p.running() == 1; }, 10s));
  const Reply rej = post(r.port, "/v1/chat/completions", chat("y"));
  EXPECT_EQ(rej.status, 429u) << rej.body;
  EXPECT_EQ(rej.header("Retry-After"), "4");
  EXPECT_EQ(rej.json_body()["error"]["message"],
            "Too many prefill requests in flight for model 'm'; retry later.");
  EXPECT_EQ(held.get().status, 200u);
  EXPECT_EQ(post(r.port, "/v1/chat/completions", chat("y")).status, 200u);
}

}  // namespace
}  // namespace cgn::router::e2e
