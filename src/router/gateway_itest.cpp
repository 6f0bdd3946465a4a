// Gateway integration tests: a real Gateway on 127.0.0.1 (port 0) in front of in-process
// FakeEngines, real HTTP both ways, synchronised with wait_until and the engines' counters.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "agent/agent_grpc.h"
#include "agent/agent_proxy.h"
#include "router/etcd_testing.h"
#include "router/fake_engine.h"
#include "router/gateway.h"
#include "router/router_itest.h"
#include "state/static/static_store.h"
#include "testing/metrics_page.h"
#include "testing/process.h"
#include "testing/test_certs.h"

namespace cgn::router {
namespace {

using namespace std::chrono_literals;
using itest::chat_body;
using itest::Client;
using itest::Headers;
using itest::Reply;
using testing::FakeEngine;

std::string random_text(std::mt19937_64& rng, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += static_cast<char>('a' + rng() % 26);
  }
  return s;
}

struct ClusterOptions {
  int nodes = 2;
  std::chrono::milliseconds poll{50};
  std::chrono::milliseconds poll_timeout{500};
  std::chrono::milliseconds mirror_interval{5000};
  std::function<void(config::RouterConfig&)> tweak;
  ApiKeys keys;
  std::string dashboard_dir;
};

// N fake engines named n0..n{N-1} behind one gateway, all healthy before the test starts.
class Cluster {
 public:
  explicit Cluster(ClusterOptions o = {}) {
    state::StaticStoreOptions so;
    so.interval = o.poll;
    so.poll_timeout = o.poll_timeout;
    for (int i = 0; i < o.nodes; ++i) {
      std::string name = "n";
      name += std::to_string(i);
      auto e = std::make_unique<FakeEngine>(name);
      EXPECT_NE(e->start(), 0);
      so.nodes.push_back(state::StaticNodeSpec{e->name(), e->url()});
      engines_.push_back(std::move(e));
    }
    auto store = state::StaticStore::create(so);
    EXPECT_TRUE(store.ok());
    store_ = store->get();
    GatewayOptions go;
    go.router.listen = "127.0.0.1:0";
    go.router.timeouts.connect_ms = 500;
    go.router.timeouts.first_token_ms = 5000;
    go.router.timeouts.idle_ms = 5000;
    go.threads = 2;
    go.dashboard_dir = o.dashboard_dir;
    go.mirror_interval = o.mirror_interval;
    go.seed = 7;
    if (o.tweak) {
      o.tweak(go.router);
    }
    gateway_ = std::make_unique<Gateway>(go, std::move(*store), std::move(o.keys));
    auto port = gateway_->start();
    EXPECT_TRUE(port.ok()) << (port.ok() ? "" : port.error().message);
    port_ = port.ok() ? *port : 0;
    const size_t n = engines_.size();
    EXPECT_TRUE(cgn::testing::wait_until([&] { return gateway_->healthy_nodes() == n; }, 10s));
  }
  ~Cluster() {
    gateway_->stop(0ms);
    for (auto& e : engines_) {
      e->stop();
    }
  }

  FakeEngine& engine(std::string_view name) {
    for (auto& e : engines_) {
      if (e->name() == name) {
        return *e;
      }
    }
    ADD_FAILURE() << "no engine " << name;
    return *engines_.front();
  }
  FakeEngine& engine(size_t i) { return *engines_[i]; }
  // Waits until every node has been polled at least twice more (a knob change is visible).
  void wait_polls() {
    const uint64_t target = store_->polls_completed() + 2 * engines_.size();
    EXPECT_TRUE(cgn::testing::wait_until([&] { return store_->polls_completed() >= target; }, 10s));
  }
  Gateway& gateway() { return *gateway_; }
  uint16_t port() const { return port_; }
  // NaN when the gateway does not expose `series` (testing/metrics_page.h).
  double metric(const std::string& series) {
    return cgn::testing::metric(gateway_->render_metrics(), series);
  }
  // For negative checks on counters created by their first increment: 0 only when the family exists.
  double count(const std::string& series) {
    return cgn::testing::count_or_zero(gateway_->render_metrics(), series);
  }

 private:
  std::vector<std::unique_ptr<FakeEngine>> engines_;
  state::StaticStore* store_ = nullptr;
  std::unique_ptr<Gateway> gateway_;
  uint16_t port_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Basic API surface

TEST(Gateway, ProxiesBufferedChatWithNodeAndRequestIdHeaders) {
  Cluster c;
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("hello"));
  ASSERT_EQ(r.status, 200u) << r.body;
  const std::string node = r.header("X-CGN-Node");
  EXPECT_TRUE(node == "n0" || node == "n1") << node;
  EXPECT_EQ(r.header("X-Fake-Engine"), node);  // the header names the node that really served
  EXPECT_TRUE(r.header("X-Request-Id").starts_with("cgn-"));
  EXPECT_EQ(r.json()["choices"][0]["message"]["content"], "tok0 tok1 tok2 tok3 ");
}

TEST(Gateway, StreamsEveryEventAndDone) {
  Cluster c;
  Client cl(c.port());
  const Reply r = cl.stream("/v1/chat/completions", chat_body("hello", true));
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.header("Content-Type"), "text/event-stream");
  ASSERT_EQ(r.events.size(), 5u);
  EXPECT_EQ(r.events.back(), "[DONE]");
  EXPECT_EQ(nlohmann::json::parse(r.events[0])["choices"][0]["delta"]["content"], "tok0 ");
  EXPECT_EQ(c.metric("cgn_router_chat_ttft_seconds_count"), 1.0);
}

TEST(Gateway, CompletionsAndEmbeddingsAreProxied) {
  Cluster c;
  Client cl(c.port());
  const Reply comp = cl.post("/v1/completions", R"({"model":"test-model","prompt":"say hi"})");
  ASSERT_EQ(comp.status, 200u) << comp.body;
  EXPECT_EQ(comp.json()["object"], "text_completion");
  const Reply emb = cl.post("/v1/embeddings", R"({"model":"test-model","input":"embed me"})");
  ASSERT_EQ(emb.status, 200u) << emb.body;
  EXPECT_EQ(emb.json()["data"][0]["embedding"].size(), 3u);
  EXPECT_FALSE(emb.header("X-CGN-Node").empty());
}

TEST(Gateway, ForwardsTheBodyUntouchedWithUnknownFields) {
  Cluster c({.nodes = 1});
  Client cl(c.port());
  const std::string body =
      R"({"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"what is this"},)"
      R"({"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],)"
      R"("tools":[{"type":"function","function":{"name":"f","parameters":{}}}],)"
      R"("response_format":{"type":"json_object"},"logprobs":true,"x_vendor":{"a":[1,2.50,"z"]}})";
  ASSERT_EQ(cl.post("/v1/chat/completions", body).status, 200u);
  const auto seen = c.engine(0).seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].body, body);
  EXPECT_EQ(seen[0].target, "/v1/chat/completions");
}

TEST(Gateway, StripsInboundCgnHeadersButPriorityAndDeadlineAndPropagatesRequestId) {
  Cluster c({.nodes = 1});
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("hi"),
                          {{"X-CGN-Role", "prefill"},
                           {"X-CGN-Node", "evil"},
                           {"X-CGN-Request-Id", "forged"},
                           {"X-CGN-Priority", "high"},
                           {"X-CGN-Deadline-Ms", "60000"},
                           {"X-Request-Id", "client-id-42"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.header("X-Request-Id"), "client-id-42");
  const auto seen = c.engine(0).seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].header("X-CGN-Role"), "both");
  EXPECT_EQ(seen[0].header("X-CGN-Node"), "");
  // The engine gets the router's id, never the client's: two tenants' ids cannot collide there.
  const std::string engine_id = seen[0].header("X-Request-Id");
  EXPECT_TRUE(engine_id.starts_with("cgn-")) << engine_id;
  EXPECT_EQ(seen[0].header("X-CGN-Request-Id"), engine_id);
  EXPECT_EQ(seen[0].header("X-CGN-Priority"), "high");
  EXPECT_EQ(seen[0].header("X-CGN-Deadline-Ms"), "60000");
}

TEST(Gateway, ForwardsOnlyAllowListedClientHeadersItsOwnForwardedForAndNoQueryString) {
  Cluster c({.nodes = 1});
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions?api-version=1&x=../admin", chat_body("hi"),
                          {{"X-Sim-Fault", "exit"},
                           {"X-Forwarded-For", "6.6.6.6"},
                           {"Cookie", "session=1"},
                           {"Connection", "keep-alive, OpenAI-Beta"},
                           {"OpenAI-Beta", "assistants=v2"},
                           {"OpenAI-Organization", "org-1"},
                           {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                           {"User-Agent", "probe/1"},
                           {"X-Request-Id", "same-id"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_TRUE(cl.post("/v1/chat/completions", chat_body("hi"), {{"X-Request-Id", "same-id"}}).status == 200u);
  const auto seen = c.engine(0).seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].target, "/v1/chat/completions");
  EXPECT_EQ(seen[0].header("X-Sim-Fault"), "");
  EXPECT_EQ(seen[0].header("Cookie"), "");
  EXPECT_EQ(seen[0].header("OpenAI-Beta"), "");  // named in Connection: a hop-by-hop header
  EXPECT_EQ(seen[0].header("X-Forwarded-For"), "127.0.0.1");
  EXPECT_EQ(seen[0].header("OpenAI-Organization"), "org-1");
  EXPECT_EQ(seen[0].header("traceparent"), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  EXPECT_EQ(seen[0].header("User-Agent"), "probe/1");
  EXPECT_EQ(seen[0].header("Content-Type"), "application/json");
  EXPECT_NE(seen[0].header("X-Request-Id"), seen[1].header("X-Request-Id"));
  EXPECT_EQ(r.header("X-Request-Id"), "same-id");
}

TEST(Gateway, ClientKvTransferParamsAre400AndReachNoNode) {
  Cluster c({.nodes = 1});
  Client cl(c.port());
  const std::string ssrf =
      R"({"do_remote_prefill":true,"remote_host":"169.254.169.254","remote_port":80,"remote_block_ids":[1]})";
  for (const std::string& body :
       {R"({"model":"test-model","messages":[{"role":"user","content":"x"}],"kv_transfer_params":)" + ssrf +
            "}",
        R"({"model":"test-model","messages":[{"role":"user","content":"x"}],"kv_transfer\u005fparams":)" +
            ssrf + "}",
        std::string(R"({"model":"test-model","prompt":"x","kv_transfer_params":null})")}) {
    const bool chat = body.find("messages") != std::string::npos;
    const Reply r = cl.post(chat ? "/v1/chat/completions" : "/v1/completions", body);
    EXPECT_EQ(r.status, 400u) << body;
    EXPECT_EQ(r.json()["error"]["param"], "kv_transfer_params") << r.body;
    EXPECT_EQ(r.json()["error"]["type"], "invalid_request_error") << r.body;
  }
  EXPECT_EQ(c.engine(0).seen().size(), 0u);
  EXPECT_EQ(c.metric("cgn_router_rejections_total{reason=\"kv_transfer_params\"}"), 3.0);
}

TEST(Gateway, AConnectionOverTheCapIs503ServerBusyAndCounted) {
  Cluster c({.nodes = 1, .tweak = [](config::RouterConfig& rc) { rc.limits.max_connections = 1; }});
  Client first(c.port());
  ASSERT_EQ(first.get("/health").status, 200u);  // its keep-alive connection stays open
  Client second(c.port());
  const Reply busy = second.get("/health");
  EXPECT_EQ(busy.status, 503u);
  EXPECT_EQ(busy.json()["error"]["code"], "server_busy") << busy.body;
  EXPECT_EQ(busy.header("Retry-After"), "1");
  EXPECT_EQ(c.metric("cgn_router_rejections_total{reason=\"connections\"}"), 1.0);
  EXPECT_EQ(first.post("/v1/chat/completions", chat_body("still served")).status, 200u);
}

TEST(Gateway, ModelsIsTheUnionOfHealthyNodesAndHealthCountsNodes) {
  Cluster c;
  Client cl(c.port());
  const Reply m = cl.get("/v1/models");
  ASSERT_EQ(m.status, 200u);
  ASSERT_EQ(m.json()["data"].size(), 1u);
  EXPECT_EQ(m.json()["data"][0]["id"], "test-model");
  const Reply h = cl.get("/health");
  ASSERT_EQ(h.status, 200u);
  EXPECT_EQ(h.json()["nodes_healthy"], 2);
}

// ---------------------------------------------------------------------------------------------
// Routing

TEST(Gateway, ABufferedAnswerNoLongerCountsInFlightWhenTheClientHasIt) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  std::mt19937_64 rng(12);
  for (int i = 0; i < 30; ++i) {
    const Reply r = cl.post("/v1/chat/completions", chat_body(random_text(rng, 600)));
    ASSERT_EQ(r.status, 200u);
    // The client's next request must not be routed as if this one still ran on its node.
    ASSERT_EQ(c.gateway().inflight("n0") + c.gateway().inflight("n1"), 0u) << "request " << i;
  }
}

TEST(Gateway, RequestsSharingALongPrefixGoToTheSameNode) {
  Cluster c({.nodes = 3});
  Client cl(c.port());
  std::mt19937_64 rng(1);
  const std::string prefix = random_text(rng, 4000);
  std::string first;
  for (int i = 0; i < 8; ++i) {
    const Reply r = cl.post("/v1/chat/completions", chat_body(prefix + " question " + std::to_string(i)));
    ASSERT_EQ(r.status, 200u);
    if (i == 0) {
      first = r.header("X-CGN-Node");
    }
    EXPECT_EQ(r.header("X-CGN-Node"), first) << "request " << i;
  }
}

TEST(Gateway, DifferentPrefixesSpreadOverNodes) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  std::mt19937_64 rng(2);
  std::map<std::string, int> per_node;
  for (int i = 0; i < 24; ++i) {
    const Reply r = cl.post("/v1/chat/completions", chat_body(random_text(rng, 2000)));
    ASSERT_EQ(r.status, 200u);
    per_node[r.header("X-CGN-Node")]++;
  }
  EXPECT_EQ(per_node.size(), 2u);
  EXPECT_GT(per_node["n0"], 2);
  EXPECT_GT(per_node["n1"], 2);
}

TEST(Gateway, AFarBusierNodeIsAvoidedDespiteOverlap) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  std::mt19937_64 rng(3);
  const std::string prefix = random_text(rng, 4000);
  const Reply warm = cl.post("/v1/chat/completions", chat_body(prefix + " a"));
  ASSERT_EQ(warm.status, 200u);
  const std::string holder = warm.header("X-CGN-Node");
  c.engine(holder).queue_depth = 40;
  c.wait_polls();
  for (int i = 0; i < 4; ++i) {
    const Reply r = cl.post("/v1/chat/completions", chat_body(prefix + " b" + std::to_string(i)));
    ASSERT_EQ(r.status, 200u);
    EXPECT_NE(r.header("X-CGN-Node"), holder);
  }
}

TEST(Gateway, AKilledNodesTrafficMovesAndInFlightRetriesSucceed) {
  // Slow polls: the router must find out from the failed connect, not from health checks.
  Cluster c({.nodes = 2, .poll = 60s});
  Client cl(c.port());
  std::mt19937_64 rng(4);
  const std::string prefix = random_text(rng, 4000);
  const Reply warm = cl.post("/v1/chat/completions", chat_body(prefix + " 0"));
  ASSERT_EQ(warm.status, 200u);
  const std::string victim = warm.header("X-CGN-Node");
  c.engine(victim).stop();
  for (int i = 1; i < 6; ++i) {
    const Reply r = cl.post("/v1/chat/completions", chat_body(prefix + " " + std::to_string(i)));
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_NE(r.header("X-CGN-Node"), victim);
    EXPECT_EQ(r.header("X-Fake-Engine"), r.header("X-CGN-Node"));
  }
  EXPECT_EQ(c.metric("cgn_router_retries_total{model=\"test-model\",reason=\"connect\"}"), 1.0);
  EXPECT_EQ(c.gateway().healthy_nodes(), 1u);
}

TEST(Gateway, FaultsBeforeTheFirstTokenAreRetriedAndHeadersNameTheServingNode) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  std::mt19937_64 rng(5);
  // Each case warms its own prefix, so the node holding it is ranked first and gets the fault.
  auto warm = [&](const std::string& prefix) {
    return cl.post("/v1/chat/completions", chat_body(prefix + " warm")).header("X-CGN-Node");
  };
  struct Case {
    int status;
    bool stream;
  };
  for (const Case& k : {Case{500, false}, Case{429, true}, Case{503, true}}) {
    const std::string prefix = random_text(rng, 4000);
    const std::string holder = warm(prefix);
    ASSERT_FALSE(holder.empty());
    c.engine(holder).fail_status = k.status;
    c.engine(holder).fail_next = 1;
    const Reply r = k.stream ? cl.stream("/v1/chat/completions", chat_body(prefix + " q", true))
                             : cl.post("/v1/chat/completions", chat_body(prefix + " q"));
    ASSERT_EQ(r.status, 200u) << k.status;
    EXPECT_NE(r.header("X-CGN-Node"), holder) << k.status;
    EXPECT_EQ(r.header("X-Fake-Engine"), r.header("X-CGN-Node"));
    EXPECT_EQ(c.engine(holder).fail_next.load(), 0);
  }
  EXPECT_EQ(c.metric("cgn_router_retries_total{model=\"test-model\",reason=\"status_5xx\"}"), 2.0);
  EXPECT_EQ(c.metric("cgn_router_retries_total{model=\"test-model\",reason=\"status_429\"}"), 1.0);

  // A stream that dies before its first event is retried too.
  const std::string prefix = random_text(rng, 4000);
  const std::string holder = warm(prefix);
  c.engine(holder).drop_after_events = 0;
  const Reply dropped = cl.stream("/v1/chat/completions", chat_body(prefix + " q2", true));
  ASSERT_EQ(dropped.status, 200u);
  EXPECT_NE(dropped.header("X-CGN-Node"), holder);
  EXPECT_EQ(dropped.events.back(), "[DONE]");
  EXPECT_EQ(c.metric("cgn_router_retries_total{model=\"test-model\",reason=\"closed\"}"), 1.0);
}

TEST(Gateway, ANodeThatStallsBeforeItsFirstTokenTimesOutAndIsRetried) {
  Cluster c({.nodes = 2, .tweak = [](config::RouterConfig& r) { r.timeouts.first_token_ms = 300; }});
  Client cl(c.port());
  std::mt19937_64 rng(8);
  const std::string prefix = random_text(rng, 4000);
  const std::string holder =
      cl.post("/v1/chat/completions", chat_body(prefix + " warm")).header("X-CGN-Node");
  ASSERT_FALSE(holder.empty());
  c.engine(holder).stall_ms = 30000;
  const Reply r = cl.stream("/v1/chat/completions", chat_body(prefix + " q", true));
  ASSERT_EQ(r.status, 200u);
  EXPECT_NE(r.header("X-CGN-Node"), holder);
  EXPECT_EQ(r.events.back(), "[DONE]");
  EXPECT_EQ(c.metric("cgn_router_retries_total{model=\"test-model\",reason=\"timeout\"}"), 1.0);
  // The router gave up on the stalled request and closed it: the engine sees the cancellation.
  EXPECT_TRUE(cgn::testing::wait_until([&] { return c.engine(holder).cancelled.load() == 1; }, 10s));
}

TEST(Gateway, WhenEveryNodeFailsTheLastAnswerIsRelayedWithItsNode) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  for (int i = 0; i < 2; ++i) {
    c.engine(i).fail_status = 503;
    c.engine(i).fail_next = 1;
  }
  const Reply r = cl.post("/v1/chat/completions", chat_body("x"));
  EXPECT_EQ(r.status, 503u);
  EXPECT_TRUE(r.header("X-CGN-Node") == "n0" || r.header("X-CGN-Node") == "n1");
  EXPECT_EQ(r.json()["error"]["message"], "injected failure");
}

int generations(Cluster& c, int nodes) {
  int n = 0;
  for (int i = 0; i < nodes; ++i) {
    n += c.engine(static_cast<size_t>(i)).generations.load();
  }
  return n;
}

TEST(Gateway, ARequestOnWhichTwoNodesCloseIsNotTriedOnAThird) {
  // Each node closes the connection on the request without a word, as an engine that dies of it.
  for (const bool stream : {false, true}) {
    Cluster c({.nodes = 3, .poll = 60s});
    for (size_t i = 0; i < 3; ++i) {
      c.engine(i).close_next = 100;
    }
    Client cl(c.port());
    const Reply r = stream ? cl.stream("/v1/chat/completions", chat_body("poison", true))
                           : cl.post("/v1/chat/completions", chat_body("poison"));
    EXPECT_EQ(r.status, 502u) << stream;
    if (!stream) {  // the stream helper keeps no error body
      EXPECT_NE(r.body.find("Two nodes closed the connection"), std::string::npos) << r.body;
    }
    EXPECT_EQ(generations(c, 3), 2) << stream;  // two nodes saw it, the third never did
    EXPECT_EQ(c.metric("cgn_router_retries_total{model=\"test-model\",reason=\"closed\"}"), 1.0);
  }
}

TEST(Gateway, AnAgentsEngineClosedAnswerCountsAsACloseAndIsRelayedWithoutTheMarker) {
  Cluster c({.nodes = 3, .poll = 60s});
  for (size_t i = 0; i < 3; ++i) {
    c.engine(i).fail_status = 502;
    c.engine(i).fail_engine_closed = true;
    c.engine(i).fail_next = 1;
  }
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("poison"));
  EXPECT_EQ(r.status, 502u);
  EXPECT_EQ(r.header("X-CGN-Failure"), "");
  EXPECT_EQ(generations(c, 3), 2);
  EXPECT_EQ(c.metric("cgn_router_retries_total{model=\"test-model\",reason=\"closed\"}"), 1.0);
}

TEST(Gateway, BareEndpointsGetNoExpectContinue) {
  // Only agents are known to answer 100 Continue; a bare OpenAI endpoint gets the body at once.
  Cluster c({.nodes = 1});
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("hello"));
  ASSERT_EQ(r.status, 200u);
  const auto seen = c.engine(0).seen();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().header("Expect"), "");
}

TEST(Gateway, BusyAnswersStillGoToEveryRankedNode) {
  // 503 and 429 say nothing against the request: up to max_attempts (3) nodes try it.
  Cluster c({.nodes = 3, .poll = 60s});
  for (size_t i = 0; i < 3; ++i) {
    c.engine(i).fail_status = i == 1 ? 429 : 503;
    c.engine(i).fail_next = 1;
  }
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("busy"));
  EXPECT_TRUE(r.status == 503u || r.status == 429u) << r.status;
  EXPECT_EQ(generations(c, 3), 3);
}

TEST(Gateway, WhenEveryNodeIsUnreachableTheAnswerIs502NamingTheLastError) {
  Cluster c({.nodes = 2, .poll = 60s});
  c.engine(0).stop();
  c.engine(1).stop();
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("x"));
  EXPECT_EQ(r.status, 502u);
  EXPECT_EQ(r.header("X-CGN-Node"), "");
  EXPECT_NE(
      r.json()["error"]["message"].get<std::string>().find("All 2 attempts for model 'test-model' failed"),
      std::string::npos)
      << r.body;
  // Both nodes left routing on the failed connects: the next request is refused at once.
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("x")).status, 503u);
}

TEST(Gateway, TheHealthListenerHearsAPollTurnTheNodeDownAndUp) {
  std::atomic<int> calls{0};  // outlives the gateway, which may call the listener until it stops
  Cluster c({.nodes = 1});
  c.gateway().set_health_listener([&] { calls.fetch_add(1); });
  c.engine(0).healthy = false;
  ASSERT_TRUE(cgn::testing::wait_until([&] { return calls.load() >= 1; }, 10s));
  // The listener runs after the table changed: whoever it wakes reads the new count.
  EXPECT_EQ(c.gateway().healthy_nodes(), 0u);
  c.engine(0).healthy = true;
  ASSERT_TRUE(cgn::testing::wait_until([&] { return calls.load() >= 2; }, 10s));
  EXPECT_EQ(c.gateway().healthy_nodes(), 1u);
  c.gateway().set_health_listener(nullptr);
}

TEST(Gateway, TheHealthListenerHearsAPassiveRefusalAndTheReadmission) {
  std::atomic<int> calls{0};
  // No poll in the test's time: only the refused connect and passive_retry_ms change the node.
  Cluster c(
      {.nodes = 1, .poll = 60s, .tweak = [](config::RouterConfig& r) { r.timeouts.passive_retry_ms = 200; }});
  c.gateway().set_health_listener([&] { calls.fetch_add(1); });
  c.engine(0).stop();
  Client cl(c.port());
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("x")).status, 502u);
  ASSERT_GE(calls.load(), 1);  // marked before the answer went out
  EXPECT_EQ(c.gateway().healthy_nodes(), 0u);
  ASSERT_TRUE(cgn::testing::wait_until([&] { return calls.load() >= 2; }, 10s));
  EXPECT_EQ(c.gateway().healthy_nodes(), 1u);  // let back in after passive_retry_ms
  c.gateway().set_health_listener(nullptr);
}

TEST(Gateway, AMidStreamFailureEndsWithAnErrorEventAndDone) {
  Cluster c({.nodes = 1});
  Client cl(c.port());
  c.engine(0).drop_after_events = 2;
  const Reply r = cl.stream("/v1/chat/completions", chat_body("x", true));
  ASSERT_EQ(r.status, 200u);
  EXPECT_FALSE(r.failed);
  ASSERT_EQ(r.events.size(), 4u);
  const auto err = nlohmann::json::parse(r.events[2]);
  EXPECT_EQ(err["error"]["type"], "server_error");
  EXPECT_NE(err["error"]["message"].get<std::string>().find("failed mid-stream"), std::string::npos);
  EXPECT_EQ(r.events[3], "[DONE]");
  EXPECT_EQ(c.engine(0).generations.load(), 1);  // never retried once tokens were sent
}

TEST(Gateway, AStreamPastRequestMsEndsWithATimeoutErrorEvent) {
  Cluster c({.nodes = 1, .tweak = [](config::RouterConfig& r) { r.timeouts.request_ms = 200; }});
  c.engine(0).tokens = 100000;
  c.engine(0).token_delay_ms = 5;
  Client cl(c.port());
  const Reply r = cl.stream("/v1/chat/completions", chat_body("x", true));
  ASSERT_EQ(r.status, 200u);
  ASSERT_GE(r.events.size(), 3u);
  EXPECT_EQ(r.events.back(), "[DONE]");
  const auto err = nlohmann::json::parse(r.events[r.events.size() - 2]);
  EXPECT_NE(err["error"]["message"].get<std::string>().find("exceeded request_ms (200 ms)"),
            std::string::npos);
  EXPECT_TRUE(cgn::testing::wait_until([&] { return c.engine(0).cancelled.load() == 1; }, 10s));
}

TEST(Gateway, AClientDisconnectCancelsTheUpstreamRequest) {
  Cluster c({.nodes = 1});
  c.engine(0).tokens = 100000;
  c.engine(0).token_delay_ms = 5;
  {
    Client cl(c.port());
    auto s = cl.open("/v1/chat/completions", chat_body("x", true));
    ASSERT_TRUE(s.has_value());
    ASSERT_TRUE(cl.next_event(*s).has_value());
  }  // the client and its connection go away mid-stream
  EXPECT_TRUE(cgn::testing::wait_until([&] { return c.engine(0).cancelled.load() == 1; }, 10s));
  EXPECT_TRUE(cgn::testing::wait_until([&] { return c.gateway().inflight("n0") == 0; }, 10s));
  EXPECT_EQ(c.engine(0).completed.load(), 0);
}

// ---------------------------------------------------------------------------------------------
// Admission

TEST(Gateway, AdmissionRejectsOverTheInFlightCapWithRetryAfter) {
  Cluster c({.nodes = 1, .tweak = [](config::RouterConfig& r) {
               r.admission.max_queue = 1;
               r.admission.retry_after_s = 3;
             }});
  c.engine(0).tokens = 100000;
  c.engine(0).token_delay_ms = 5;
  Client holder(c.port());
  auto s = holder.open("/v1/chat/completions", chat_body("x", true));
  ASSERT_TRUE(s.has_value());
  ASSERT_TRUE(holder.next_event(*s).has_value());
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("y"));
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(r.header("Retry-After"), "3");
  EXPECT_EQ(r.json()["error"]["code"], "queue_full");
  EXPECT_EQ(c.metric("cgn_router_admission_rejections_total{model=\"test-model\",reason=\"queue_full\"}"),
            1.0);
  s.reset();
  // The slot comes back when the stream ends.
  EXPECT_TRUE(cgn::testing::wait_until([&] { return c.gateway().inflight("n0") == 0; }, 10s));
  c.engine(0).tokens = 2;
  EXPECT_TRUE(cgn::testing::wait_until(
      [&] { return cl.post("/v1/chat/completions", chat_body("z")).status == 200; }, 10s, 20ms));
}

TEST(Gateway, DeadlineAdmissionRejectsWhenTheTtftEstimateExceedsTheBudget) {
  Cluster c({.nodes = 2});
  for (int i = 0; i < 2; ++i) {
    c.engine(i).queue_depth = 20;  // 20 x 50 ms queue wait = 1 s estimated TTFT
  }
  c.wait_polls();
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("x"), {{"X-CGN-Deadline-Ms", "100"}});
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(r.json()["error"]["code"], "deadline_exceeded");
  EXPECT_FALSE(r.header("Retry-After").empty());
  EXPECT_EQ(c.metric("cgn_router_admission_rejections_total{model=\"test-model\",reason=\"deadline\"}"), 1.0);
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("x"), {{"X-CGN-Deadline-Ms", "60000"}}).status, 200u);
}

// ---------------------------------------------------------------------------------------------
// Health

TEST(Gateway, ANodeFailingHealthLeavesRoutingAndReturnsWhenItRecovers) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  c.engine("n0").healthy = false;
  ASSERT_TRUE(cgn::testing::wait_until([&] { return c.gateway().healthy_nodes() == 1; }, 10s));
  std::mt19937_64 rng(6);
  for (int i = 0; i < 6; ++i) {
    const Reply r = cl.post("/v1/chat/completions", chat_body(random_text(rng, 1000)));
    ASSERT_EQ(r.status, 200u);
    EXPECT_EQ(r.header("X-CGN-Node"), "n1");
  }
  c.engine("n0").healthy = true;
  ASSERT_TRUE(cgn::testing::wait_until([&] { return c.gateway().healthy_nodes() == 2; }, 10s));
  std::set<std::string> nodes;
  for (int i = 0; i < 24; ++i) {
    nodes.insert(cl.post("/v1/chat/completions", chat_body(random_text(rng, 1000))).header("X-CGN-Node"));
  }
  EXPECT_EQ(nodes.size(), 2u);
}

TEST(Gateway, NoHealthyNodeIs503) {
  Cluster c({.nodes = 1});
  c.engine(0).healthy = false;
  ASSERT_TRUE(cgn::testing::wait_until([&] { return c.gateway().healthy_nodes() == 0; }, 10s));
  Client cl(c.port());
  const Reply r = cl.post("/v1/chat/completions", chat_body("x"));
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(r.json()["error"]["code"], "no_healthy_node");
  EXPECT_EQ(cl.get("/health").json()["status"], "degraded");
}

// Liveness of polled (static) nodes: the polls refresh them, so an idle cluster keeps serving
// however long no request comes; a node whose polls stop answering for max_staleness leaves
// routing, and /health, cgn_cluster_node_up and the log say so.
TEST(Gateway, AnIdleStaticClusterKeepsServingPastMaxStaleness) {
  Cluster c({.nodes = 2, .tweak = [](config::RouterConfig& r) { r.routing.max_staleness_ms = 500; }});
  Client cl(c.port());
  ASSERT_EQ(cl.post("/v1/chat/completions", chat_body("before")).status, 200u);
  // The condition under test is time passing with no traffic (twice max_staleness), not a wait
  // for an event.
  std::this_thread::sleep_for(1100ms);
  const Reply r = cl.post("/v1/chat/completions", chat_body("after an idle spell"));
  EXPECT_EQ(r.status, 200u) << r.body;
  const Reply h = cl.get("/health");
  EXPECT_EQ(h.json()["nodes_healthy"], 2);
  EXPECT_EQ(h.json()["nodes_stale"], 0);
}

TEST(Gateway, ANodeWhosePollsStopAnsweringIsStaleUntilTheyAnswerAndSaysSo) {
  cgn::testing::TempDir dir;
  const std::string log_file = dir.file("router.log");
  log::set_file_sink(log_file);
  {
    Cluster c({.nodes = 2, .poll_timeout = 20s, .tweak = [](config::RouterConfig& r) {
                 r.routing.max_staleness_ms = 1000;
               }});
    Client cl(c.port());
    c.engine("n0").health_stall_ms = 20000;  // polls of n0 hang, well past max_staleness
    ASSERT_TRUE(cgn::testing::wait_until([&] { return c.gateway().stale_nodes() == 1; }, 10s));
    const Reply h = cl.get("/health");
    EXPECT_EQ(h.json()["nodes_stale"], 1);
    EXPECT_EQ(h.json()["nodes_healthy"], 1);
    std::mt19937_64 rng(11);
    for (int i = 0; i < 6; ++i) {
      const Reply r = cl.post("/v1/chat/completions", chat_body(random_text(rng, 1000)));
      ASSERT_EQ(r.status, 200u);
      EXPECT_EQ(r.header("X-CGN-Node"), "n1");
    }
    for (int i = 0; i < 3; ++i) {
      c.gateway().refresh_cluster_metrics();
    }
    EXPECT_EQ(c.metric("cgn_cluster_node_up{node=\"n0\"}"), 0.0);
    EXPECT_EQ(c.metric("cgn_cluster_node_up{node=\"n1\"}"), 1.0);
    // The hung poll answers once the stall ends: n0 is back.
    c.engine("n0").health_stall_ms = 0;
    ASSERT_TRUE(cgn::testing::wait_until([&] { return c.gateway().stale_nodes() == 0; }, 30s));
    ASSERT_TRUE(cgn::testing::wait_until([&] { return c.gateway().healthy_nodes() == 2; }, 10s));
  }
  log::set_stderr_sink();
  const std::string text = cgn::testing::read_file(log_file);
  auto count = [&](std::string_view what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("node left routing (its polls have not answered for max_staleness) node=n0"), 1u) << text;
  EXPECT_EQ(count("node in routing node=n0 state=up"), 2u) << text;  // first sight, and the return
}

// ---------------------------------------------------------------------------------------------
// Bad input and auth

struct BadCase {
  const char* name;
  http::Verb verb;
  const char* target;
  std::string body;
  Headers headers;
  unsigned status;
  const char* type;
  const char* param;  // "" = null
  const char* code;   // "" = null
  const char* message_part;
};

// The bad inputs and the error each one gets.
std::vector<BadCase> bad_body_cases() {
  const auto post = http::Verb::post;
  return {
      {"malformed json",
       post,
       "/v1/chat/completions",
       "{\"model\":",
       {},
       400,
       "invalid_request_error",
       "",
       "",
       ""},
      {"empty body", post, "/v1/chat/completions", "", {}, 400, "invalid_request_error", "", "", ""},
      {"not an object", post, "/v1/chat/completions", "[1,2]", {}, 400, "invalid_request_error", "", "", ""},
      {"missing model",
       post,
       "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"x"}]})",
       {},
       400,
       "invalid_request_error",
       "model",
       "",
       "'model' is required"},
      {"model wrong type",
       post,
       "/v1/chat/completions",
       R"({"model":7,"messages":[{"role":"user","content":"x"}]})",
       {},
       400,
       "invalid_request_error",
       "model",
       "",
       "'model'"},
      {"unknown model",
       post,
       "/v1/chat/completions",
       chat_body("x", false, "gpt-nope"),
       {},
       404,
       "not_found_error",
       "model",
       "model_not_found",
       "The model 'gpt-nope' does not exist or no node serves it."},
      {"empty messages",
       post,
       "/v1/chat/completions",
       R"({"model":"test-model","messages":[]})",
       {},
       400,
       "invalid_request_error",
       "messages",
       "",
       "'messages' must be a non-empty array"},
      {"messages not array",
       post,
       "/v1/chat/completions",
       R"({"model":"test-model","messages":"hi"})",
       {},
       400,
       "invalid_request_error",
       "messages",
       "",
       "'messages'"},
      {"missing messages",
       post,
       "/v1/chat/completions",
       R"({"model":"test-model"})",
       {},
       400,
       "invalid_request_error",
       "messages",
       "",
       "'messages' is required"},
  };
}

std::vector<BadCase> bad_request_cases() {
  std::string deep = R"({"model":"test-model","messages":[{"role":"user","content":"x"}],"x":)";
  for (int i = 0; i < 20; ++i) {
    deep += "[";
  }
  for (int i = 0; i < 20; ++i) {
    deep += "]";
  }
  deep += "}";
  nlohmann::json many = {{"model", "test-model"}, {"messages", nlohmann::json::array()}};
  for (int i = 0; i < 9; ++i) {
    many["messages"].push_back({{"role", "user"}, {"content", "m"}});
  }
  const auto post = http::Verb::post;
  return {
      {"too many messages",
       post,
       "/v1/chat/completions",
       many.dump(),
       {},
       400,
       "invalid_request_error",
       "messages",
       "",
       "'messages'"},
      {"too deep",
       post,
       "/v1/chat/completions",
       deep,
       {},
       400,
       "invalid_request_error",
       "",
       "",
       "deeper than 16 levels"},
      {"body too large",
       post,
       "/v1/chat/completions",
       chat_body(std::string(70 * 1024, 'x')),
       {},
       413,
       "invalid_request_error",
       "",
       "",
       ""},
      {"headers too large",
       post,
       "/v1/chat/completions",
       chat_body("x"),
       {{"X-Junk", std::string(8000, 'j')}},
       431,
       "invalid_request_error",
       "",
       "",
       ""},
      {"completions without prompt",
       post,
       "/v1/completions",
       R"({"model":"test-model"})",
       {},
       400,
       "invalid_request_error",
       "prompt",
       "",
       "'prompt' is required"},
      {"embeddings without input",
       post,
       "/v1/embeddings",
       R"({"model":"test-model"})",
       {},
       400,
       "invalid_request_error",
       "input",
       "",
       "'input' is required"},
      {"bad deadline",
       post,
       "/v1/chat/completions",
       chat_body("x"),
       {{"X-CGN-Deadline-Ms", "soon"}},
       400,
       "invalid_request_error",
       "X-CGN-Deadline-Ms",
       "",
       "'X-CGN-Deadline-Ms' must be a whole number of milliseconds in 1..86400000."},
      {"bad priority",
       post,
       "/v1/chat/completions",
       chat_body("x"),
       {{"X-CGN-Priority", "urgent"}},
       400,
       "invalid_request_error",
       "X-CGN-Priority",
       "",
       "'X-CGN-Priority' must be low, normal or high."},
      {"wrong method",
       http::Verb::get,
       "/v1/chat/completions",
       "",
       {},
       405,
       "invalid_request_error",
       "",
       "",
       ""},
      {"unknown path", post, "/v1/nothing", "{}", {}, 404, "not_found_error", "", "", ""},
  };
}

std::vector<BadCase> bad_input_cases() {
  std::vector<BadCase> all = bad_body_cases();
  for (auto& k : bad_request_cases()) {
    all.push_back(std::move(k));
  }
  return all;
}

TEST(Gateway, BadInputsGetExactOpenAIErrors) {
  Cluster c({.nodes = 1, .tweak = [](config::RouterConfig& r) {
               r.limits.max_body_bytes = 64 * 1024;
               r.limits.max_messages = 8;
               r.limits.max_json_depth = 16;
               r.limits.max_header_bytes = 4096;
             }});
  const std::vector<BadCase> cases = bad_input_cases();
  for (const auto& k : cases) {
    Client cl(c.port());
    const Reply r = cl.send(k.verb, k.target, k.body, k.headers);
    ASSERT_FALSE(r.failed) << k.name;
    EXPECT_EQ(r.status, k.status) << k.name << ": " << r.body;
    const auto j = r.json();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << k.name << ": " << r.body;
    EXPECT_EQ(j["error"]["type"], k.type) << k.name;
    if (*k.param != 0) {
      EXPECT_EQ(j["error"]["param"], k.param) << k.name << ": " << r.body;
    }
    if (*k.code != 0) {
      EXPECT_EQ(j["error"]["code"], k.code) << k.name;
    }
    EXPECT_NE(j["error"]["message"].get<std::string>().find(k.message_part), std::string::npos)
        << k.name << ": " << r.body;
  }
  EXPECT_EQ(c.engine(0).generations.load(), 0);  // nothing bad reached the node
  // The unknown model was counted under _unknown, not under its own name.
  EXPECT_EQ(c.metric("cgn_router_requests_total{model=\"_unknown\",endpoint=\"chat\",code=\"404\"}"), 1.0);
  EXPECT_EQ(c.gateway().render_metrics().find("gpt-nope"), std::string::npos);
}

TEST(Gateway, ApiKeysAreRequiredWhenConfigured) {
  auto keys = ApiKeys::parse("# test keys\nsk-test-0123456789abcdef\n", "keys");
  ASSERT_TRUE(keys.ok());
  Cluster c({.nodes = 1, .keys = std::move(*keys)});
  Client cl(c.port());
  const Reply none = cl.post("/v1/chat/completions", chat_body("x"));
  EXPECT_EQ(none.status, 401u);
  EXPECT_EQ(none.json()["error"]["type"], "authentication_error");
  EXPECT_EQ(
      cl.post("/v1/chat/completions", chat_body("x"), {{"Authorization", "Bearer sk-wrong-0123456789abcdef"}})
          .status,
      401u);
  EXPECT_EQ(cl.get("/v1/models").status, 401u);
  const Reply ok =
      cl.post("/v1/chat/completions", chat_body("x"), {{"Authorization", "Bearer sk-test-0123456789abcdef"}});
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(c.engine(0).seen().at(0).header("Authorization"), "");  // the router's key stays with the router
  EXPECT_EQ(cl.get("/v1/models", {{"Authorization", "bearer sk-test-0123456789abcdef"}}).status, 200u);
  EXPECT_EQ(cl.get("/health").status, 200u);
  EXPECT_EQ(cl.get("/metrics").status, 200u);
}

// [cluster] token: presented to agent nodes (polled through Agent.Health with it, sent on every
// request), never to a bare OpenAI endpoint.
TEST(Gateway, TheClusterTokenGoesToAgentNodesOnly) {
  const std::string token = "router-cluster-token-0123456789";
  FakeEngine behind_agent("agent-node"), bare("bare-node");
  ASSERT_NE(behind_agent.start(), 0);
  ASSERT_NE(bare.start(), 0);
  // The agent's gRPC side: answers Health only with the token.
  cluster::NodeRecord rec;
  rec.node_id = "agent-node";
  rec.address = behind_agent.url().substr(std::string("http://").size());
  rec.engine = "vllm";
  rec.models = {"test-model"};
  rec.ready = true;
  rec.total_blocks = 1000;
  rec.free_blocks = 1000;
  auto grpc = agent::AgentGrpcServer::start(
      "127.0.0.1:0",
      [&] {
        return cluster::AgentHealth{rec, cluster::EngineState::kReady, 1};
      },
      cluster::GrpcSecurity{auth::ClusterToken({token}), {}});
  ASSERT_TRUE(grpc.ok()) << grpc.error().message;
  state::StaticStoreOptions so;
  so.interval = 50ms;
  so.poll_timeout = 500ms;
  so.security.token = auth::ClusterToken({token});
  so.nodes.push_back(state::StaticNodeSpec{"agent-node", behind_agent.url()});
  so.nodes.back().agent = "127.0.0.1:" + std::to_string((*grpc)->port());
  so.nodes.push_back(state::StaticNodeSpec{"bare-node", bare.url()});
  auto store = state::StaticStore::create(so);
  ASSERT_TRUE(store.ok()) << store.error().message;
  GatewayOptions go;
  go.router.listen = "127.0.0.1:0";
  go.router.policy = "round_robin";
  go.cluster_token = auth::ClusterToken({token});
  Gateway gw(go, std::move(*store), ApiKeys{});
  auto port = gw.start();
  ASSERT_TRUE(port.ok()) << port.error().message;
  ASSERT_TRUE(cgn::testing::wait_until([&] { return gw.healthy_nodes() == 2; }, 10s))
      << "the agent node never became healthy: Agent.Health without the token?";
  Client cl(*port);
  for (int i = 0; i < 6 && (behind_agent.seen().empty() || bare.seen().empty()); ++i) {
    ASSERT_EQ(cl.post("/v1/chat/completions", chat_body("x" + std::to_string(i)),
                      {{std::string(auth::kClusterTokenHeader), "forged-by-a-client-0123456789"}})
                  .status,
              200u);
  }
  ASSERT_FALSE(behind_agent.seen().empty());
  ASSERT_FALSE(bare.seen().empty());
  EXPECT_EQ(behind_agent.seen()[0].header(auth::kClusterTokenHeader), token);
  EXPECT_EQ(bare.seen()[0].header(auth::kClusterTokenHeader), "");  // neither ours nor the client's
  gw.stop(0ms);
}

// [tls] on both sides: the router polls the agent's Agent.Health and sends requests to its data
// path over mutual TLS (the agent requires a client certificate), with no cluster token at all.
TEST(Gateway, WithTlsTheRouterReachesAgentsOverMutualTls) {
  cgn::testing::TempDir dir;
  cgn::testing::TestCa ca(dir.path(), "cluster");
  const auto agent_cert = ca.issue("agent");
  const auto router_cert = ca.issue("router");
  auto tls_of = [&](const cgn::testing::CertFiles& c) {
    config::TlsConfig t;
    t.ca_file = ca.ca_file();
    t.cert_file = c.cert;
    t.key_file = c.key;
    return t;
  };
  FakeEngine engine("tls-node");
  ASSERT_NE(engine.start(), 0);
  agent::AgentProxyOptions po;
  po.host = "127.0.0.1";
  po.port = 0;
  po.node_id = "tls-node";
  po.engine = http::Upstream{"127.0.0.1", engine.port(), false};
  po.tls = tls_of(agent_cert);
  agent::AgentProxy proxy(
      po,
      [] {
        return agent::EngineHealth{true, "ready"};
      },
      nullptr);
  auto proxy_port = proxy.start();
  ASSERT_TRUE(proxy_port.ok()) << proxy_port.error().message;
  cluster::NodeRecord rec;
  rec.node_id = "tls-node";
  rec.address = "127.0.0.1:" + std::to_string(*proxy_port);
  rec.engine = "vllm";
  rec.models = {"test-model"};
  rec.ready = true;
  auto grpc = agent::AgentGrpcServer::start(
      "127.0.0.1:0",
      [&] {
        return cluster::AgentHealth{rec, cluster::EngineState::kReady, 1};
      },
      cluster::GrpcSecurity{{}, tls_of(agent_cert)});
  ASSERT_TRUE(grpc.ok()) << grpc.error().message;
  state::StaticStoreOptions so;
  so.interval = 50ms;
  so.poll_timeout = 1000ms;
  so.security.tls = tls_of(router_cert);
  so.nodes.push_back(state::StaticNodeSpec{"tls-node", "http://127.0.0.1:" + std::to_string(*proxy_port)});
  so.nodes.back().agent = "127.0.0.1:" + std::to_string((*grpc)->port());
  auto store = state::StaticStore::create(so);
  ASSERT_TRUE(store.ok()) << store.error().message;
  GatewayOptions go;
  go.router.listen = "127.0.0.1:0";
  go.tls = tls_of(router_cert);
  Gateway gw(go, std::move(*store), ApiKeys{});
  auto port = gw.start();
  ASSERT_TRUE(port.ok()) << port.error().message;
  ASSERT_TRUE(cgn::testing::wait_until([&] { return gw.healthy_nodes() == 1; }, 10s))
      << "Agent.Health over mutual TLS never answered";
  Client cl(*port);
  const Reply r = cl.post("/v1/chat/completions", chat_body("over tls"));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.header("X-CGN-Node"), "tls-node");
  ASSERT_EQ(engine.seen().size(), 1u);  // through the agent's TLS listener to the engine
  gw.stop(0ms);
  proxy.stop(0ms);
}

// ---------------------------------------------------------------------------------------------
// Metrics and dashboard

TEST(Gateway, MetricsCarryEveryFamilyOfTheDashboardListAndPassPromtool) {
  Cluster c;
  Client cl(c.port());
  ASSERT_EQ(cl.post("/v1/chat/completions", chat_body("x")).status, 200u);
  ASSERT_EQ(cl.stream("/v1/chat/completions",
                      R"({"model":"test-model","stream":true,"stream_options":{"include_usage":true},)"
                      R"("messages":[{"role":"user","content":"y"}]})")
                .status,
            200u);
  c.gateway().refresh_cluster_metrics();
  const Reply m = cl.get("/metrics");
  ASSERT_EQ(m.status, 200u);
  EXPECT_EQ(m.header("Access-Control-Allow-Origin"), "*");
  const std::string names = cgn::testing::read_file(cgn::testing::source_path("dashboard/metric_names.txt"));
  std::istringstream in(names);
  std::string line;
  int families = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') {
      continue;
    }
    const std::string name = line.substr(0, line.find(' '));
    EXPECT_NE(m.body.find("# TYPE " + name + " "), std::string::npos) << name;
    ++families;
  }
  EXPECT_GE(families, 21);
  EXPECT_EQ(c.metric("cgn_router_generation_tokens_total{model=\"test-model\"}"), 8.0);
  EXPECT_EQ(c.metric("cgn_router_prompt_tokens_total{model=\"test-model\"}"), 14.0);
  EXPECT_EQ(c.metric("cgn_cluster_node_up{node=\"n0\"}"), 1.0);
  EXPECT_EQ(c.metric("cgn_cluster_node_info{node=\"n1\",model=\"test-model\",engine=\"vllm\",role=\"both\","
                     "gpu_name=\"\"}"),
            1.0);

  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("metrics.txt"), m.body);
  const std::string cmd =
      "promtool check metrics < " + dir.file("metrics.txt") + " > " + dir.file("out.txt") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cgn::testing::read_file(dir.file("out.txt"));
}

TEST(Gateway, PrefixIndexEntriesIsTheIndexSizeAtEveryScrape) {
  // No mirror refresh comes between the traffic and the scrape: the gauge must not wait for one.
  Cluster c({.nodes = 2, .mirror_interval = std::chrono::hours(1)});
  Client cl(c.port());
  size_t expected = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string body = chat_body(etcdtest::long_prompt("index" + std::to_string(i), 6));
    expected += etcdtest::body_digests(body).size();
    for (int k = 0; k < 2; ++k) {  // the second request is a prefix hit on the first one's node
      ASSERT_EQ(cl.post("/v1/chat/completions", body).status, 200u);
    }
  }
  ASSERT_GE(expected, 18u);
  const Reply m = cl.get("/metrics");
  EXPECT_NE(m.body.find("\ncgn_router_prefix_index_entries " + std::to_string(expected) + "\n"),
            std::string::npos)
      << m.body;
}

// Power is never invented: nodes that report none (these fake engines) have no power series, and
// the cluster total and tokens per watt have no sample, so the dashboard shows "no data", not 0 W.
TEST(Gateway, UnknownPowerIsAbsentFromMetricsNotZero) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  ASSERT_EQ(cl.post("/v1/chat/completions", chat_body("x")).status, 200u);
  c.gateway().refresh_cluster_metrics();
  c.gateway().refresh_cluster_metrics();
  const Reply m = cl.get("/metrics");
  ASSERT_EQ(m.status, 200u);
  EXPECT_NE(m.body.find("cgn_cluster_node_up{node=\"n0\"} 1"), std::string::npos) << m.body;
  for (const char* family : {"cgn_cluster_node_power_watts", "cgn_cluster_node_watt_limit",
                             "cgn_cluster_power_watts_total", "cgn_cluster_tokens_per_watt"}) {
    // The family stays listed (dashboards find it), with no sample.
    EXPECT_NE(m.body.find(std::string("# TYPE ") + family + " "), std::string::npos) << family;
    EXPECT_EQ(m.body.find(std::string("\n") + family + "{"), std::string::npos) << family << "\n" << m.body;
    EXPECT_EQ(m.body.find(std::string("\n") + family + " "), std::string::npos) << family << "\n" << m.body;
  }
}

TEST(Gateway, ServesTheDashboardFilesAndNothingElse) {
  Cluster c({.nodes = 1, .dashboard_dir = cgn::testing::source_path("dashboard")});
  Client cl(c.port());
  const Reply index = cl.get("/dashboard/");
  ASSERT_EQ(index.status, 200u);
  EXPECT_TRUE(index.header("Content-Type").starts_with("text/html"));
  EXPECT_NE(index.body.find("<html"), std::string::npos);
  EXPECT_EQ(cl.get("/dashboard/prom.js").status, 200u);
  EXPECT_EQ(cl.get("/dashboard/dashboard.css").status, 200u);
  EXPECT_EQ(cl.get("/dashboard/../CMakeLists.txt").status, 404u);
  EXPECT_EQ(cl.get("/dashboard/.hidden").status, 404u);
  EXPECT_EQ(cl.get("/dashboard/mock_metrics.py").status, 404u);  // in the folder, not on the list
  EXPECT_EQ(cl.get("/dashboard/README.md").status, 404u);
  EXPECT_EQ(cl.get("/dashboard").status, 308u);
}

TEST(Gateway, MetricsMoveToTheirOwnListenerAndAnswerOnlyWithTheMetricsKey) {
  Cluster c({.nodes = 1, .tweak = [](config::RouterConfig& rc) {
               rc.metrics.listen = "127.0.0.1:0";
               rc.metrics.key = config::Secret("mk-metrics-0123456789", "CGN_TEST_METRICS_KEY");
             }});
  Client api(c.port());
  EXPECT_EQ(api.get("/metrics").status, 404u);  // not on the API listener any more
  ASSERT_NE(c.gateway().metrics_port(), 0);
  Client m(c.gateway().metrics_port());
  const Reply none = m.get("/metrics");
  EXPECT_EQ(none.status, 401u);
  EXPECT_EQ(none.json()["error"]["type"], "authentication_error");
  const Reply ok = m.get("/metrics", {{"Authorization", "Bearer mk-metrics-0123456789"}});
  ASSERT_EQ(ok.status, 200u);
  EXPECT_NE(ok.body.find("cgn_router_requests_total"), std::string::npos);
  EXPECT_EQ(ok.header("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(m.get("/v1/models").status, 404u);  // the metrics listener serves nothing else
  EXPECT_EQ(c.metric("cgn_router_rejections_total{reason=\"metrics_auth\"}"), 1.0);
}

TEST(Gateway, AMetricsKeyAloneClosesMetricsOnTheApiListener) {
  Cluster c({.nodes = 1, .tweak = [](config::RouterConfig& rc) {
               rc.metrics.key = config::Secret("mk-metrics-0123456789", "CGN_TEST_METRICS_KEY");
             }});
  Client cl(c.port());
  EXPECT_EQ(cl.get("/metrics").status, 401u);
  EXPECT_EQ(cl.get("/metrics", {{"Authorization", "Bearer mk-metrics-0123456789"}}).status, 200u);
  EXPECT_EQ(cl.send(http::Verb::options, "/metrics").status, 204u);         // the dashboard's preflight
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("x")).status, 200u);  // no API keys: open
}

TEST(Gateway, GracefulStopLetsAnInFlightStreamFinish) {
  auto c = std::make_unique<Cluster>(ClusterOptions{.nodes = 1});
  c->engine(0).tokens = 20;
  c->engine(0).token_delay_ms = 10;
  Client cl(c->port());
  auto s = cl.open("/v1/chat/completions", chat_body("x", true));
  ASSERT_TRUE(s.has_value());
  std::vector<std::string> events;
  auto first = cl.next_event(*s);
  ASSERT_TRUE(first.has_value());
  events.push_back(*first);
  std::thread stopper([&] { c->gateway().stop(10s); });
  while (auto ev = cl.next_event(*s)) {
    events.push_back(*ev);
  }
  stopper.join();
  ASSERT_EQ(events.size(), 21u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(c->engine(0).completed.load(), 1);
}

TEST(Gateway, ServesTheApiOverTlsWhenConfigured) {
  cgn::testing::TempDir dir;
  const std::string cert = dir.file("cert.pem");
  const std::string key = dir.file("key.pem");
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + key + " -out " +
      cert + " -days 1 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Cluster c({.nodes = 1, .tweak = [&](config::RouterConfig& r) {
               r.tls_cert = cert;
               r.tls_key = key;
             }});
  http::ClientConfig cc;
  cc.tls_ca_file = cert;
  Client tls(c.port(), true, cc);
  const Reply r = tls.stream("/v1/chat/completions", chat_body("x", true));
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.events.back(), "[DONE]");
  Client plain(c.port());
  EXPECT_TRUE(plain.get("/health").failed);  // no plaintext on a TLS listener
}

// ---------------------------------------------------------------------------------------------
// /v1/responses

std::string responses_body(const std::string& input, const std::string& previous = "", bool stream = false) {
  nlohmann::json j = {{"model", "test-model"}, {"input", input}};
  if (!previous.empty()) {
    j["previous_response_id"] = previous;
  }
  if (stream) {
    j["stream"] = true;
  }
  return j.dump();
}

// The response id a /v1/responses answer announces (buffered body or response.created event).
std::string response_id_of(const Reply& r) {
  if (!r.events.empty()) {
    return nlohmann::json::parse(r.events.front())["response"]["id"].get<std::string>();
  }
  return r.json()["id"].get<std::string>();
}

TEST(Gateway, ResponsesFollowUpsGoToTheNodeThatHoldsTheResponse) {
  Cluster c({.nodes = 3});
  Client cl(c.port());
  // The first turn lands on n2: the other two look busy.
  c.engine("n0").queue_depth = 40;
  c.engine("n1").queue_depth = 40;
  c.wait_polls();
  const Reply first = cl.stream("/v1/responses", responses_body("turn 0", "", true));
  ASSERT_EQ(first.status, 200u) << first.body;
  ASSERT_EQ(first.header("X-CGN-Node"), "n2");
  std::string previous = response_id_of(first);
  // Now n2 looks busiest: only the response it holds keeps the follow-ups there.
  c.engine("n0").queue_depth = 0;
  c.engine("n1").queue_depth = 0;
  c.engine("n2").queue_depth = 40;
  c.wait_polls();
  for (int turn = 1; turn <= 4; ++turn) {
    const bool stream = turn % 2 == 0;
    const std::string body = responses_body("turn " + std::to_string(turn), previous, stream);
    const Reply r = stream ? cl.stream("/v1/responses", body) : cl.post("/v1/responses", body);
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.header("X-CGN-Node"), "n2") << "turn " << turn;
    previous = response_id_of(r);
  }
  // A request without history goes where routing says.
  const Reply fresh = cl.post("/v1/responses", responses_body("unrelated"));
  ASSERT_EQ(fresh.status, 200u);
  EXPECT_NE(fresh.header("X-CGN-Node"), "n2");
  // Recorded once the answer is out: poll.
  const std::string series =
      R"(cgn_router_requests_total{model="test-model",endpoint="responses",code="200"})";
  EXPECT_TRUE(cgn::testing::wait_until([&] { return c.metric(series) == 6.0; }, 10s)) << c.metric(series);
  // Tokens from the Responses usage (input_tokens 7, output_tokens 1 per answer, buffered or streamed).
  EXPECT_EQ(c.metric(R"(cgn_router_prompt_tokens_total{model="test-model"})"), 42.0);
  EXPECT_EQ(c.metric(R"(cgn_router_generation_tokens_total{model="test-model"})"), 6.0);
  EXPECT_EQ(c.engine("n2").seen().back().target, "/v1/responses");
}

TEST(Gateway, ResponsesFollowUpWhoseNodeIsGoneIsA400) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  const Reply first = cl.post("/v1/responses", responses_body("hello"));
  ASSERT_EQ(first.status, 200u) << first.body;
  const std::string holder = first.header("X-CGN-Node");
  c.engine(holder).stop();
  const Reply r = cl.post("/v1/responses", responses_body("again", response_id_of(first)));
  ASSERT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.json()["error"]["code"], "previous_response_not_found");
  EXPECT_EQ(r.json()["error"]["param"], "previous_response_id");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find(response_id_of(first)), std::string::npos);
}

TEST(Gateway, ResponsesUnknownPreviousIdIsRoutedAndTheEnginesAnswerRelayed) {
  Cluster c({.nodes = 2});
  Client cl(c.port());
  const Reply r = cl.post("/v1/responses", responses_body("hi", "resp_made_elsewhere"));
  EXPECT_EQ(r.status, 404u) << r.body;
  EXPECT_EQ(r.json()["error"]["message"], "Response not found");
}

TEST(Gateway, ResponsesOnEnginesWithoutTheEndpointIsA400NamingIt) {
  Cluster c({.nodes = 3});
  Client cl(c.port());
  c.engine("n0").serve_responses = false;
  c.engine("n1").serve_responses = false;
  // One of three serves it: the others are failed over.
  for (int i = 0; i < 3; ++i) {
    const Reply r = cl.post("/v1/responses", responses_body("hi " + std::to_string(i)));
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.header("X-CGN-Node"), "n2");
  }
  c.engine("n2").serve_responses = false;
  const Reply r = cl.post("/v1/responses", responses_body("hi"));
  ASSERT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.json()["error"]["code"], "endpoint_not_supported");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("/v1/responses"), std::string::npos);
  // Chat still works on the same engines.
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("hi")).status, 200u);
}

TEST(Gateway, ResponsesBadBodyIsA400NamingTheField) {
  Cluster c({.nodes = 1});
  Client cl(c.port());
  const Reply r =
      cl.post("/v1/responses", R"({"model":"test-model","input":[{"type":"function_call_output"}]})");
  ASSERT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "input[0].call_id");
  EXPECT_EQ(c.engine(0).generations.load(), 0);
}

}  // namespace
}  // namespace cgn::router
