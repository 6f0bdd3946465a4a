// The Dispatcher's two seams, over real HTTP on loopback: an attempt target may be a federation
// peer (an upstream that is not in the node table), and a request may be a sequence of steps (a
// cascade plan: step 1 buffered, a decision on its answer, step 2 relayed). The aggregated and
// P/D plans on the same interface are covered through the Gateway (gateway_itest.cpp,
// disagg_itest.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "router/dispatcher.h"
#include "router/fake_engine.h"
#include "router/request_plan.h"
#include "router/router_itest.h"

namespace cgn::router {
namespace {

namespace asio = boost::asio;
using nlohmann::json;
using testing::FakeEngine;

Target peer(const std::string& label, uint16_t port) {
  Target t;
  t.node = label;
  t.endpoint.host = "127.0.0.1";
  t.endpoint.port = port;
  return t;  // index kNoNode: not in any node table
}

// A router of one route whose handler builds a RequestContext and hands it to `serve`.
class MiniRouter {
 public:
  using Serve = std::function<asio::awaitable<void>(RequestContext&, Dispatcher&)>;

  explicit MiniRouter(Serve serve) : serve_(std::move(serve)) {
    rc_.timeouts.connect_ms = 1000;
    http::ServerConfig sc;
    sc.host = "127.0.0.1";
    sc.threads = 1;
    http::RouteTable rt;
    rt.post("/v1/chat/completions", [this](http::Exchange& ex) { return handle(ex); });
    server_ = std::make_unique<http::Server>(sc, std::move(rt));
    client_ = std::make_unique<http::HttpClient>(server_->worker_context(0));
  }
  ~MiniRouter() {
    server_->stop(std::chrono::milliseconds(0));
    client_.reset();
  }
  uint16_t start() {
    auto p = server_->start();
    return p.ok() ? *p : 0;
  }

  SteadyClock clock;
  NodeTable nodes{clock, {}, {}, 0};
  RouterMetrics metrics;

 private:
  asio::awaitable<void> handle(http::Exchange& ex) {
    RequestContext ctx{ex,
                       ex.request(),
                       "client-id",
                       "cgn-upstream-id",
                       ex.remote_address(),
                       "test-model",
                       "chat",
                       std::chrono::steady_clock::now()};
    Dispatcher d(services_, *client_);
    co_await serve_(ctx, d);
  }

  Serve serve_;
  config::RouterConfig rc_;
  Admission admission_;
  auth::ClusterToken token_;
  GatewayServices services_{nodes, metrics, admission_, rc_, token_, 3};
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<http::HttpClient> client_;
};

http::HttpResult<http::Response> chat(uint16_t port) {
  http::Request req{http::Verb::post, "/v1/chat/completions", 11};
  req.set(http::Field::content_type, "application/json");
  req.body() = R"({"model":"test-model","messages":[{"role":"user","content":"hi"}]})";
  req.prepare_payload();
  return itest::send_request(port, std::move(req));
}

// A port nothing listens on: bound, then closed.
uint16_t dead_port() {
  FakeEngine gone("gone");
  const uint16_t p = gone.start();
  gone.stop();
  return p;
}

TEST(Dispatcher, APeerTargetIsDialledWithoutTheNodeTableAndFailsOverToTheNextPeer) {
  FakeEngine live("live");
  ASSERT_NE(live.start(), 0);
  const uint16_t dead = dead_port();
  ASSERT_NE(dead, 0);
  MiniRouter router([&](RequestContext& ctx, Dispatcher& d) -> asio::awaitable<void> {
    const std::vector<Target> targets{peer("peer-down", dead), peer("peer-up", live.port())};
    const Dispatcher::Step step;
    Dispatcher::Outcome out = co_await d.run(ctx, step, targets);
    if (out.kind == Dispatcher::Outcome::Kind::kFailed) {
      co_await d.answer_failure(ctx, out);
    }
  });
  const uint16_t port = router.start();
  ASSERT_NE(port, 0);

  auto res = chat(port);
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_EQ(res->result_int(), 200u) << res->body();
  EXPECT_EQ((*res)["X-CGN-Node"], "peer-up");
  EXPECT_EQ((*res)["X-Request-Id"], "client-id");
  ASSERT_EQ(live.seen().size(), 1u);
  EXPECT_EQ(live.seen()[0].header("X-CGN-Role"), "both");
  EXPECT_EQ(live.seen()[0].header("X-Request-Id"), "cgn-upstream-id");
  // Peers are no nodes: nothing was added to, or marked in, the routing core.
  EXPECT_EQ(router.nodes.known_nodes(), 0u);
  for (const char* name : {"peer-down", "peer-up"}) {
    EXPECT_EQ(router.nodes.locked(
                  [&](routing::RoutingCore& core, NodeTable::Nodes&) { return core.find_node(name); }),
              routing::kNoNode)
        << name;
  }
}

// A cascade: a buffered first step on a small model; its answer decides whether a second,
// relayed step runs on a larger one, with the first answer carried in its body.
class CascadePlan final : public RequestPlan {
 public:
  CascadePlan(Target small, Target large, bool escalate)
      : small_(std::move(small)), large_(std::move(large)), escalate_(escalate) {}

  asio::awaitable<void> serve(RequestContext& ctx, Dispatcher& d) override {
    Dispatcher::Step draft;
    draft.role = "draft";
    draft.buffered = true;
    const std::vector<Target> first{small_};
    Dispatcher::Outcome out = co_await d.run(ctx, draft, first);
    if (out.kind != Dispatcher::Outcome::Kind::kHeld) {
      if (out.kind == Dispatcher::Outcome::Kind::kFailed) {
        co_await d.answer_failure(ctx, out);
      }
      co_return;
    }
    if (!escalate_) {
      http::Response res = std::move(*out.answer);
      res.set("X-CGN-Node", out.node);
      res.prepare_payload();
      (void)co_await ctx.ex.respond(std::move(res));
      co_return;
    }
    json body = json::parse(ctx.req.body());
    body["cascade_draft_node"] = out.node;
    escalated_body_ = body.dump();
    Dispatcher::Step final_step;
    final_step.body = &escalated_body_;
    const std::vector<Target> second{large_};
    Dispatcher::Outcome last = co_await d.run(ctx, final_step, second);
    if (last.kind == Dispatcher::Outcome::Kind::kFailed) {
      co_await d.answer_failure(ctx, last);
    }
  }

 private:
  Target small_, large_;
  bool escalate_;
  std::string escalated_body_;
};

TEST(Dispatcher, ACascadePlanRunsABufferedStepDecidesAndRelaysASecondStep) {
  FakeEngine small("small"), large("large");
  ASSERT_NE(small.start(), 0);
  ASSERT_NE(large.start(), 0);
  for (const bool escalate : {true, false}) {
    SCOPED_TRACE(escalate ? "escalate" : "keep the draft");
    const size_t small_before = small.seen().size();
    const size_t large_before = large.seen().size();
    MiniRouter router([&](RequestContext& ctx, Dispatcher& d) -> asio::awaitable<void> {
      CascadePlan plan(peer("small", small.port()), peer("large", large.port()), escalate);
      co_await plan.serve(ctx, d);
    });
    const uint16_t port = router.start();
    ASSERT_NE(port, 0);
    auto res = chat(port);
    ASSERT_TRUE(res.ok()) << res.error().message;
    EXPECT_EQ(res->result_int(), 200u) << res->body();
    ASSERT_EQ(small.seen().size(), small_before + 1);
    EXPECT_EQ(small.seen().back().header("X-CGN-Role"), "draft");
    if (escalate) {
      EXPECT_EQ((*res)["X-CGN-Node"], "large");
      ASSERT_EQ(large.seen().size(), large_before + 1);
      EXPECT_EQ(json::parse(large.seen().back().body).value("cascade_draft_node", ""), "small");
    } else {
      EXPECT_EQ((*res)["X-CGN-Node"], "small");
      EXPECT_EQ(large.seen().size(), large_before);
    }
  }
}

}  // namespace
}  // namespace cgn::router
