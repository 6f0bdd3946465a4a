#include "router/carbon/gate.h"

#include <gtest/gtest.h>

namespace cgn::router::carbon {
namespace {

constexpr Nanos kInterval = 10 * kNanosPerSecond;

struct GateFixture : ::testing::Test {
  ManualClock clock{1000 * kNanosPerSecond};
  Gate gate{GateOptions{400, kInterval, "static", "DE"}, clock};
  void read(double g) {
    gate.record(Reading{g, false});
    gate.set_next_poll(clock.now() + kInterval);
  }
};

TEST_F(GateFixture, fails_open_before_the_first_reading) {
  EXPECT_EQ(gate.snapshot().state, GateState::kNoReading);
  EXPECT_FALSE(gate.snapshot().gco2_per_kwh.has_value());
  EXPECT_TRUE(gate.check("low").admit);
}

TEST_F(GateFixture, defers_low_just_over_the_threshold) {
  read(400.001);
  EXPECT_EQ(gate.snapshot().state, GateState::kDefer);
  const auto d = gate.check("low");
  EXPECT_FALSE(d.admit);
  EXPECT_DOUBLE_EQ(d.gco2_per_kwh, 400.001);
}

TEST_F(GateFixture, admits_low_at_the_threshold) {
  read(400);
  EXPECT_EQ(gate.snapshot().state, GateState::kAdmit);
  EXPECT_TRUE(gate.check("low").admit);
}

TEST_F(GateFixture, admits_low_just_under_the_threshold) {
  read(399.999);
  EXPECT_EQ(gate.snapshot().state, GateState::kAdmit);
  EXPECT_TRUE(gate.check("low").admit);
}

TEST_F(GateFixture, normal_high_and_unmarked_always_pass) {
  read(5000);
  EXPECT_FALSE(gate.check("low").admit);
  EXPECT_TRUE(gate.check("normal").admit);
  EXPECT_TRUE(gate.check("high").admit);
  EXPECT_TRUE(gate.check("").admit);
}

TEST_F(GateFixture, fails_open_when_the_reading_is_older_than_three_intervals) {
  read(900);
  clock.advance(3 * kInterval);
  EXPECT_EQ(gate.snapshot().state, GateState::kDefer) << "exactly 3 intervals old is not stale yet";
  EXPECT_FALSE(gate.check("low").admit);
  clock.advance(1);
  EXPECT_EQ(gate.snapshot().state, GateState::kStale);
  EXPECT_TRUE(gate.check("low").admit);
  EXPECT_DOUBLE_EQ(*gate.snapshot().age_s, 30.000000001);
  read(900);  // a fresh reading closes it again
  EXPECT_FALSE(gate.check("low").admit);
}

TEST_F(GateFixture, retry_after_counts_whole_seconds_to_the_next_poll) {
  read(900);
  EXPECT_EQ(gate.check("low").retry_after_s, 10u);
  clock.advance(kInterval - kNanosPerSecond - 1);  // 1 s + 1 ns left: rounds up
  EXPECT_EQ(gate.check("low").retry_after_s, 2u);
  clock.advance(kNanosPerSecond + 1);  // the poll is due (in flight): at least 1
  EXPECT_EQ(gate.check("low").retry_after_s, 1u);
  gate.set_next_poll(clock.now() + 95 * kNanosPerSecond);  // a backoff after a failure
  EXPECT_EQ(gate.check("low").retry_after_s, 95u);
}

TEST(GateLabels, one_label_per_state_in_enum_order) {
  EXPECT_EQ(state_label(GateState::kNoReading), "no_reading");
  EXPECT_EQ(state_label(GateState::kStale), "stale");
  EXPECT_EQ(state_label(GateState::kAdmit), "admit");
  EXPECT_EQ(state_label(GateState::kDefer), "defer");
}

}  // namespace
}  // namespace cgn::router::carbon
