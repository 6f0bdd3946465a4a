// The providers against FakeCarbonServer on loopback: real HTTP, the real request and response
// shapes (auth headers, WattTime login and token expiry, units), and the faults (401, 429 with
// Retry-After, slow answers, garbage bodies).
#include <gtest/gtest.h>

#include "router/carbon/fake_provider.h"
#include "router/carbon/providers.h"
#include "testing/run_on.h"

namespace cgn::router::carbon {
namespace {

using namespace std::chrono_literals;
using cgn::testing::run_on;

struct ProviderFixture : ::testing::Test {
  ManualClock clock{1'000'000 * kNanosPerSecond};
  FakeCarbonServer fake{[this] {
    FakeCarbonOptions o;
    o.clock = &clock;
    o.gco2_per_kwh = 250;
    return o;
  }()};
  boost::asio::io_context ctx;
  http::HttpClient client{ctx};
  http::ClientTimeouts timeouts{500ms, 500ms, 500ms, 500ms, 0ms};

  void SetUp() override { ASSERT_TRUE(fake.start().ok()); }

  std::unique_ptr<Provider> make(const std::string& name,
                                 std::function<void(config::CarbonConfig&)> tweak = {}) {
    config::CarbonConfig c;
    c.provider = name;
    c.url = fake.url();
    c.zone = name == "watttime" ? "CAISO_NORTH" : "DE";
    c.token = config::Secret("em-test-token", "EM_TOKEN");
    c.username = "wt-user";
    c.password = config::Secret("wt-password", "WT_PASSWORD");
    if (tweak) {
      tweak(c);
    }
    auto p = make_provider(c);
    EXPECT_TRUE(p.ok());
    return std::move(*p);
  }
  FetchResult fetch(Provider& p) { return run_on(ctx, p.fetch(client, timeouts, clock.now())); }
};

TEST_F(ProviderFixture, electricitymaps_sends_the_auth_token_and_reads_gco2) {
  auto p = make("electricitymaps");
  auto r = fetch(*p);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->gco2_per_kwh, 250);
  EXPECT_EQ(fake.em_requests(), 1u);
  EXPECT_EQ(fake.unauthorized(), 0u);
}

TEST_F(ProviderFixture, electricitymaps_wrong_token_is_unauthorized) {
  auto p =
      make("electricitymaps", [](config::CarbonConfig& c) { c.token = config::Secret("nope", "EM_TOKEN"); });
  auto r = fetch(*p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code.reason, FetchReason::kUnauthorized);
  EXPECT_EQ(fake.unauthorized(), 1u);
  EXPECT_EQ(r.error().message.find("nope"), std::string::npos) << "the key is not in the message";
}

TEST_F(ProviderFixture, watttime_logs_in_once_and_converts_lbs_per_mwh) {
  auto p = make("watttime");
  for (int i = 0; i < 3; ++i) {
    auto r = fetch(*p);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_NEAR(r->gco2_per_kwh, 250, 1e-9);  // the fake serves 250 g/kWh as lbs/MWh
  }
  EXPECT_EQ(fake.logins(), 1u);
  EXPECT_EQ(fake.forecasts(), 3u);
}

TEST_F(ProviderFixture, watttime_renews_the_token_before_its_30_minutes_run_out) {
  auto p = make("watttime");
  ASSERT_TRUE(fetch(*p).ok());
  clock.advance(28 * 60 * kNanosPerSecond);
  ASSERT_TRUE(fetch(*p).ok());
  EXPECT_EQ(fake.logins(), 1u);
  clock.advance(90 * kNanosPerSecond);  // 29.5 minutes: inside the last minute, renewed first
  ASSERT_TRUE(fetch(*p).ok());
  EXPECT_EQ(fake.logins(), 2u);
  EXPECT_EQ(fake.unauthorized(), 0u) << "an expired token is never sent";
}

TEST_F(ProviderFixture, watttime_logs_in_again_once_on_a_401) {
  auto p = make("watttime");
  ASSERT_TRUE(fetch(*p).ok());
  fake.expire_tokens();  // revoked early: the forecast answers 401
  auto r = fetch(*p);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(fake.logins(), 2u);
  EXPECT_EQ(fake.unauthorized(), 1u);
}

TEST_F(ProviderFixture, watttime_bad_password_is_unauthorized) {
  auto p =
      make("watttime", [](config::CarbonConfig& c) { c.password = config::Secret("wrong", "WT_PASSWORD"); });
  auto r = fetch(*p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code.reason, FetchReason::kUnauthorized);
  EXPECT_EQ(fake.forecasts(), 0u);
}

TEST_F(ProviderFixture, watttime_percentile_units_are_refused) {
  fake.set_units("percentile");
  auto r = fetch(*make("watttime"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code.reason, FetchReason::kBadUnits);
}

TEST_F(ProviderFixture, a_429_carries_its_retry_after) {
  fake.fail_next(429, 1, 42);
  auto r = fetch(*make("electricitymaps"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code.reason, FetchReason::kRateLimited);
  EXPECT_EQ(r.error().code.retry_after_s, 42u);
}

TEST_F(ProviderFixture, a_5xx_is_an_http_status_failure) {
  fake.fail_next(503, 1);
  auto r = fetch(*make("electricitymaps"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code.reason, FetchReason::kHttpStatus);
}

TEST_F(ProviderFixture, garbage_bodies_are_bad_body) {
  fake.set_garbage(true);
  auto em = fetch(*make("electricitymaps"));
  ASSERT_FALSE(em.ok());
  EXPECT_EQ(em.error().code.reason, FetchReason::kBadBody);
  auto wt = fetch(*make("watttime"));
  ASSERT_FALSE(wt.ok());
  EXPECT_EQ(wt.error().code.reason, FetchReason::kBadBody);
}

TEST_F(ProviderFixture, a_slow_answer_times_out_as_transport) {
  fake.set_delay(2000ms);
  const auto start = std::chrono::steady_clock::now();
  auto r = fetch(*make("electricitymaps"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code.reason, FetchReason::kTransport);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1900ms) << "gave up at the timeout, not the answer";
}

TEST_F(ProviderFixture, nothing_listening_is_transport) {
  const std::string url = fake.url();
  fake.stop();
  auto r = fetch(*make("electricitymaps", [&](config::CarbonConfig& c) { c.url = url; }));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code.reason, FetchReason::kTransport);
}

}  // namespace
}  // namespace cgn::router::carbon
