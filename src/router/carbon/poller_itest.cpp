// The Poller against FakeCarbonServer: readings reach the Gate, failures are counted and backed
// off (a 429's Retry-After honoured), and the gate fails open until the first good poll.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "router/carbon/fake_provider.h"
#include "router/carbon/poller.h"
#include "router/carbon/providers.h"
#include "testing/process.h"

namespace cgn::router::carbon {
namespace {

using namespace std::chrono_literals;
using cgn::testing::wait_until;

struct PollerFixture : ::testing::Test {
  FakeCarbonServer fake;
  Gate gate{GateOptions{400, 200 * kNanosPerMilli, "electricitymaps", "DE"}, SteadyClock::instance()};
  std::mutex mu;
  std::map<std::string, int> failures;

  void SetUp() override { ASSERT_TRUE(fake.start().ok()); }

  std::unique_ptr<Poller> make_poller() {
    config::CarbonConfig c;
    c.provider = "electricitymaps";
    c.url = fake.url();
    c.zone = "DE";
    c.token = config::Secret("em-test-token", "EM_TOKEN");
    auto p = make_provider(c);
    EXPECT_TRUE(p.ok());
    PollerOptions o;
    o.interval = 200 * kNanosPerMilli;
    o.timeout = 1000 * kNanosPerMilli;
    o.max_backoff = 5000 * kNanosPerMilli;
    o.on_failure = [this](FetchReason r) {
      std::lock_guard lock(mu);
      ++failures[std::string(reason_label(r))];
    };
    return std::make_unique<Poller>(std::move(*p), gate, o);
  }
  int failed(const std::string& reason) {
    std::lock_guard lock(mu);
    return failures[reason];
  }
};

TEST_F(PollerFixture, readings_reach_the_gate_and_follow_the_provider) {
  fake.set_gco2(650);
  auto poller = make_poller();
  poller->start();
  ASSERT_TRUE(wait_until([&] { return gate.snapshot().state == GateState::kDefer; }, 10s));
  EXPECT_FALSE(gate.check("low").admit);
  fake.set_gco2(120);
  ASSERT_TRUE(wait_until([&] { return gate.snapshot().state == GateState::kAdmit; }, 10s));
  EXPECT_DOUBLE_EQ(*gate.snapshot().gco2_per_kwh, 120);
  poller->stop();
}

TEST_F(PollerFixture, fails_open_until_the_first_successful_poll) {
  fake.set_gco2(900);
  fake.fail_next(503, 2);
  auto poller = make_poller();
  poller->start();
  ASSERT_TRUE(wait_until([&] { return failed("http_status") >= 1; }, 10s));
  EXPECT_EQ(gate.snapshot().state, GateState::kNoReading);
  EXPECT_TRUE(gate.check("low").admit);
  ASSERT_TRUE(wait_until([&] { return gate.snapshot().state == GateState::kDefer; }, 20s));
  EXPECT_EQ(failed("http_status"), 2);
}

TEST_F(PollerFixture, a_429_backs_off_for_its_retry_after) {
  fake.fail_next(429, 1, 2);
  auto poller = make_poller();
  poller->start();
  ASSERT_TRUE(wait_until([&] { return fake.arrivals().size() >= 2; }, 15s));
  const auto a = fake.arrivals();
  EXPECT_GE(a[1] - a[0], 2 * kNanosPerSecond)
      << "the second poll waited for Retry-After, not the 200 ms interval";
  EXPECT_EQ(failed("rate_limited"), 1);
  ASSERT_TRUE(wait_until([&] { return gate.snapshot().state == GateState::kAdmit; }, 10s));
}

TEST_F(PollerFixture, repeated_errors_back_off_exponentially) {
  fake.fail_next(500, 4);
  auto poller = make_poller();
  poller->start();
  ASSERT_TRUE(wait_until([&] { return fake.arrivals().size() >= 5; }, 20s));
  const auto a = fake.arrivals();
  // Waits after failures 1..4: 200, 400, 800, 1600 ms (interval x 2^(n-1)).
  for (size_t i = 1; i < 5; ++i) {
    const Nanos want = (200 * kNanosPerMilli) << (i - 1);
    EXPECT_GE(a[i] - a[i - 1], want) << "gap " << i;
  }
}

TEST_F(PollerFixture, stop_cancels_a_slow_poll_promptly) {
  fake.set_delay(5000ms);
  auto poller = make_poller();
  poller->start();
  ASSERT_TRUE(wait_until([&] { return fake.arrivals().size() >= 1; }, 10s));
  const auto start = std::chrono::steady_clock::now();
  poller->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

}  // namespace
}  // namespace cgn::router::carbon
