// Carbon-aware admission through the real Gateway: a FakeEngine behind it, a FakeCarbonServer
// (Electricity Maps v3 on loopback) as the provider, real HTTP both ways. Low priority is
// deferred (429, OpenAI error naming the carbon reason, Retry-After) while the grid is over the
// threshold and admitted again when it drops; normal and high always pass; the gate fails open
// before the first reading and when the reading is stale; the metrics say which state it is in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/log.h"
#include "router/carbon/fake_provider.h"
#include "router/fake_engine.h"
#include "router/gateway.h"
#include "router/router_itest.h"
#include "state/static/static_store.h"
#include "testing/metrics_page.h"
#include "testing/process.h"

namespace cgn::router {
namespace {

using namespace std::chrono_literals;
using cgn::testing::wait_until;
using itest::chat_body;
using itest::Client;
using itest::Reply;

const itest::Headers kLow = {{"X-CGN-Priority", "low"}};

// One FakeEngine behind a Gateway whose [router.carbon] polls `fake` every 200 ms.
class CarbonRouter {
 public:
  explicit CarbonRouter(carbon::FakeCarbonServer& fake, uint32_t poll_ms = 200) {
    EXPECT_NE(engine_.start(), 0);
    state::StaticStoreOptions so;
    so.interval = 50ms;
    so.nodes.push_back(state::StaticNodeSpec{engine_.name(), engine_.url()});
    auto store = state::StaticStore::create(so);
    EXPECT_TRUE(store.ok());
    GatewayOptions go;
    go.router.listen = "127.0.0.1:0";
    go.router.carbon.provider = "electricitymaps";
    go.router.carbon.url = fake.url();
    go.router.carbon.zone = "DE";
    go.router.carbon.token = config::Secret("em-test-token", "EM_TOKEN");
    go.router.carbon.threshold_gco2_per_kwh = 400;
    go.router.carbon.poll_interval_ms = poll_ms;
    go.router.carbon.timeout_ms = 1000;
    go.router.carbon.max_backoff_ms = 5000;
    gateway_ = std::make_unique<Gateway>(go, std::move(*store), ApiKeys{});
    auto port = gateway_->start();
    EXPECT_TRUE(port.ok()) << (port.ok() ? "" : port.error().message);
    port_ = port.ok() ? *port : 0;
    EXPECT_TRUE(wait_until([&] { return gateway_->healthy_nodes() == 1; }, 10s));
  }
  ~CarbonRouter() {
    gateway_->stop(0ms);
    engine_.stop();
  }
  uint16_t port() const { return port_; }
  Gateway& gateway() { return *gateway_; }
  std::optional<double> sample(const std::string& series) {
    return cgn::testing::sample(gateway_->render_metrics(), series);
  }
  bool in_state(const std::string& state) {
    return sample("cgn_router_carbon_gate_state{state=\"" + state + "\"}") == 1.0;
  }

 private:
  testing::FakeEngine engine_{"n0"};
  std::unique_ptr<Gateway> gateway_;
  uint16_t port_ = 0;
};

struct CarbonGateway : ::testing::Test {
  carbon::FakeCarbonServer fake;
  void SetUp() override { ASSERT_TRUE(fake.start().ok()); }
};

TEST_F(CarbonGateway, defers_low_priority_over_the_threshold_and_admits_it_again_below) {
  fake.set_gco2(612);
  CarbonRouter r(fake);
  ASSERT_TRUE(wait_until([&] { return r.in_state("defer"); }, 10s));
  Client cl(r.port());
  const Reply low = cl.post("/v1/chat/completions", chat_body("hello"), kLow);
  EXPECT_EQ(low.status, 429u);
  EXPECT_EQ(low.json()["error"]["code"], "carbon_intensity_high");
  EXPECT_EQ(low.json()["error"]["type"], "rate_limit_error");
  EXPECT_THAT(low.json()["error"]["message"].get<std::string>(), ::testing::HasSubstr("612 gCO2/kWh"));
  const int retry = std::stoi(low.header("Retry-After"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 1) << "the next poll is at most 200 ms away";
  EXPECT_EQ(cl.post("/v1/completions", R"({"model":"test-model","prompt":"x"})", kLow).status, 429u);
  EXPECT_EQ(cl.post("/v1/embeddings", R"({"model":"test-model","input":"x"})", kLow).status, 429u);
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("hello"), {{"X-CGN-Priority", "normal"}}).status, 200u);
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("hello"), {{"X-CGN-Priority", "high"}}).status, 200u);
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("hello")).status, 200u);
  EXPECT_EQ(r.sample("cgn_router_admission_rejections_total{model=\"test-model\",reason=\"carbon\"}"), 3.0);
  EXPECT_EQ(r.sample("cgn_router_carbon_intensity_gco2_per_kwh{provider=\"electricitymaps\",zone=\"DE\"}"),
            612.0);
  EXPECT_LT(r.sample("cgn_router_carbon_reading_age_seconds{provider=\"electricitymaps\",zone=\"DE\"}")
                .value_or(1e9),
            30.0);

  fake.set_gco2(380);
  ASSERT_TRUE(wait_until([&] { return r.in_state("admit"); }, 10s));
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("hello"), kLow).status, 200u);
  EXPECT_EQ(r.sample("cgn_router_carbon_gate_state{state=\"defer\"}"), 0.0);
}

TEST_F(CarbonGateway, fails_open_until_the_first_successful_poll) {
  fake.set_gco2(900);
  fake.fail_next(401, 1000);  // the key is refused: no reading, ever
  CarbonRouter r(fake);
  ASSERT_TRUE(wait_until(
      [&] { return r.sample("cgn_router_carbon_poll_failures_total{reason=\"unauthorized\"}") >= 1.0; },
      10s));
  EXPECT_TRUE(r.in_state("no_reading"));
  EXPECT_FALSE(r.sample("cgn_router_carbon_intensity_gco2_per_kwh{provider=\"electricitymaps\",zone=\"DE\"}"))
      << "no reading is not a reading of 0";
  Client cl(r.port());
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("hello"), kLow).status, 200u);
}

TEST_F(CarbonGateway, fails_open_when_the_reading_goes_stale) {
  fake.set_gco2(900);
  CarbonRouter r(fake);
  ASSERT_TRUE(wait_until([&] { return r.in_state("defer"); }, 10s));
  fake.fail_next(503, 1000);  // every later poll fails; the reading ages past 3 x 200 ms
  ASSERT_TRUE(wait_until([&] { return r.in_state("stale"); }, 10s));
  Client cl(r.port());
  EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("hello"), kLow).status, 200u);
  EXPECT_GE(r.sample("cgn_router_carbon_poll_failures_total{reason=\"http_status\"}").value_or(0), 1.0);
  EXPECT_GT(
      r.sample("cgn_router_carbon_reading_age_seconds{provider=\"electricitymaps\",zone=\"DE\"}").value_or(0),
      0.6);
}

TEST_F(CarbonGateway, no_key_or_prompt_reaches_the_log) {
  const auto path =
      std::filesystem::temp_directory_path() / ("carbon-log-" + std::to_string(::getpid()) + ".log");
  log::set_file_sink(path.string());
  {
    fake.set_gco2(700);
    CarbonRouter r(fake);
    ASSERT_TRUE(wait_until([&] { return r.in_state("defer"); }, 10s));
    Client cl(r.port());
    EXPECT_EQ(cl.post("/v1/chat/completions", chat_body("secret-prompt-4711"), kLow).status, 429u);
    fake.fail_next(401, 1000);
    ASSERT_TRUE(wait_until(
        [&] { return r.sample("cgn_router_carbon_poll_failures_total{reason=\"unauthorized\"}") >= 1.0; },
        10s));
  }
  log::set_stderr_sink();
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::filesystem::remove(path);
  EXPECT_THAT(text.str(), ::testing::HasSubstr("carbon")) << "the log was captured";
  EXPECT_THAT(text.str(), ::testing::Not(::testing::HasSubstr("em-test-token")));
  EXPECT_THAT(text.str(), ::testing::Not(::testing::HasSubstr("secret-prompt-4711")));
}

}  // namespace
}  // namespace cgn::router
