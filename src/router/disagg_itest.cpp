// The two legs of disaggregated serving as the engines see them: a Gateway in process over
// FakeEngines in the roles prefill and decode, which record every request. (The fake engine
// returns no kv_transfer_params, so decode recomputes; the handoff itself is covered against
// the simulator in disagg_e2e.cpp.)
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "router/fake_engine.h"
#include "router/gateway.h"
#include "router/router_itest.h"
#include "state/static/static_store.h"
#include "testing/process.h"

namespace cgn::router {
namespace {

using namespace std::chrono_literals;
using itest::send_request;
using nlohmann::json;
using testing::FakeEngine;

// A gateway over one prefill fake engine "p" and one decode fake engine "d", both healthy.
class OnePrefillOneDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(p.start(), 0);
    ASSERT_NE(d.start(), 0);
    state::StaticStoreOptions so;
    so.interval = 50ms;
    so.poll_timeout = 500ms;
    so.nodes = {state::StaticNodeSpec{"p", p.url(), routing::NodeRole::kPrefill},
                state::StaticNodeSpec{"d", d.url(), routing::NodeRole::kDecode}};
    auto store = state::StaticStore::create(so);
    ASSERT_TRUE(store.ok());
    GatewayOptions go;
    go.router.listen = "127.0.0.1:0";
    go.threads = 1;
    g = std::make_unique<Gateway>(go, std::move(*store), ApiKeys{});
    auto started = g->start();
    ASSERT_TRUE(started.ok());
    port = *started;
    ASSERT_TRUE(cgn::testing::wait_until([&] { return g->healthy_nodes() == 2; }, 10s));
  }

  FakeEngine p{"p"}, d{"d"};
  std::unique_ptr<Gateway> g;
  uint16_t port = 0;
};

TEST_F(OnePrefillOneDecode, BothLegsCarryTheRequestIdAndTheirRoleAndThePrefillBodyIsRewritten) {
  const std::string body =
      R"({"model":"test-model","messages":[{"role":"user","content":"hello"}],"stream":true,)"
      R"("stream_options":{"include_usage":true},"max_tokens":50,"min_tokens":3,"x_vendor":[1,2]})";
  http::Request req{http::Verb::post, "/v1/chat/completions", 11};
  req.set(http::Field::content_type, "application/json");
  req.set("X-Request-Id", "pd-itest-1");
  req.body() = body;
  req.prepare_payload();
  auto res = send_request(port, std::move(req));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->result_int(), 200u);
  EXPECT_EQ((*res)["X-CGN-Node"], "d");
  EXPECT_EQ((*res)["X-CGN-Prefill-Node"], "p");
  EXPECT_EQ((*res)["X-Request-Id"], "pd-itest-1");

  const auto ps = p.seen(), ds = d.seen();
  ASSERT_EQ(ps.size(), 1u);
  ASSERT_EQ(ds.size(), 1u);
  // Both legs carry one id, the router's own (the client's stays with the client).
  EXPECT_TRUE(ps[0].header("X-Request-Id").starts_with("cgn-")) << ps[0].header("X-Request-Id");
  EXPECT_EQ(ds[0].header("X-Request-Id"), ps[0].header("X-Request-Id"));
  EXPECT_EQ(ps[0].header("X-CGN-Role"), "prefill");
  EXPECT_EQ(ds[0].header("X-CGN-Role"), "decode");
  EXPECT_EQ(ps[0].target, "/v1/chat/completions");
  const json pj = json::parse(ps[0].body);
  EXPECT_EQ(pj["max_tokens"], 1);
  EXPECT_EQ(pj["stream"], false);
  EXPECT_FALSE(pj.contains("stream_options"));
  EXPECT_FALSE(pj.contains("min_tokens"));
  EXPECT_EQ(pj["kv_transfer_params"]["do_remote_decode"], true);
  EXPECT_EQ(pj["x_vendor"], json::parse("[1,2]"));
  // No params came back: decode gets the client's body untouched.
  EXPECT_EQ(ds[0].body, body);
  g->stop(0ms);
}

// A Responses request for a prefill/decode model is served whole on one node (docs/router.md: the
// engine that answers keeps the response, so its legs cannot be split): no prefill leg, the client's
// body untouched.
TEST_F(OnePrefillOneDecode, AResponsesRequestIsServedWholeOnOneNode) {
  const std::string body = R"({"model":"test-model","input":"hello","max_output_tokens":5})";
  http::Request req{http::Verb::post, "/v1/responses", 11};
  req.set(http::Field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  auto res = send_request(port, std::move(req));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->result_int(), 200u) << res->body();
  EXPECT_EQ((*res)["X-CGN-Prefill-Node"], "");
  const auto ps = p.seen(), ds = d.seen();
  ASSERT_EQ(ps.size() + ds.size(), 1u);
  const auto& seen = ps.empty() ? ds[0] : ps[0];
  EXPECT_EQ((*res)["X-CGN-Node"], ps.empty() ? "d" : "p");
  EXPECT_EQ(seen.target, "/v1/responses");
  EXPECT_EQ(seen.body, body);
  EXPECT_NE(seen.header("X-CGN-Role"), "prefill");
  g->stop(0ms);
}

TEST(GatewayDisagg, APrefillFailureIsRetriedOnTheNextPrefillNode) {
  FakeEngine p1("p1"), p2("p2"), d("d");
  for (auto* e : {&p1, &p2, &d}) {
    ASSERT_NE(e->start(), 0);
  }
  p1.fail_next = 1;
  p1.fail_status = 503;
  p2.fail_next = 1;
  p2.fail_status = 503;
  state::StaticStoreOptions so;
  so.interval = 50ms;
  so.nodes = {state::StaticNodeSpec{"p1", p1.url(), routing::NodeRole::kPrefill},
              state::StaticNodeSpec{"p2", p2.url(), routing::NodeRole::kPrefill},
              state::StaticNodeSpec{"d", d.url(), routing::NodeRole::kDecode}};
  auto store = state::StaticStore::create(so);
  ASSERT_TRUE(store.ok());
  GatewayOptions go;
  go.router.listen = "127.0.0.1:0";
  go.router.disaggregation.fallback = "reject";
  go.threads = 1;
  Gateway g(go, std::move(*store), ApiKeys{});
  auto port = g.start();
  ASSERT_TRUE(port.ok());
  ASSERT_TRUE(cgn::testing::wait_until([&] { return g.healthy_nodes() == 3; }, 10s));
  auto send = [&] {
    http::Request req{http::Verb::post, "/v1/completions", 11};
    req.set(http::Field::content_type, "application/json");
    req.body() = R"({"model":"test-model","prompt":"x"})";
    req.prepare_payload();
    return send_request(*port, std::move(req));
  };
  // Both prefill nodes fail once: with fallback "reject" the last prefill answer is relayed.
  auto first = send();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->result_int(), 503u);
  EXPECT_EQ(d.generations.load(), 0);
  // Then one fails and the other answers: served.
  p1.fail_next = 1;
  auto second = send();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->result_int(), 200u);
  EXPECT_EQ((*second)["X-CGN-Node"], "d");
  EXPECT_GE(p1.generations.load() + p2.generations.load(), 3);
  const std::string m = g.render_metrics();
  EXPECT_NE(m.find("cgn_router_pd_legs_total{model=\"test-model\",leg=\"prefill\",outcome=\"failed\"} 1"),
            std::string::npos)
      << m;
  g.stop(0ms);
}

}  // namespace
}  // namespace cgn::router
