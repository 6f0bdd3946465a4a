#include "sim/faults.h"

#include <gtest/gtest.h>

namespace cgn::sim {
namespace {

TEST(Faults, ParsesEveryItem) {
  auto p = parse_fault_spec("error=429, drop_after=5 ,stall=250ms@3,slow_start=2s,exit", true);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->error_status, 429);
  EXPECT_EQ(p->drop_after_events, 5u);
  EXPECT_EQ(p->stall, 250 * kNanosPerMilli);
  EXPECT_EQ(p->stall_after_events, 3u);
  EXPECT_EQ(p->slow_start, 2 * kNanosPerSecond);
  EXPECT_TRUE(p->exit_process);
  auto flag = parse_fault_spec("refuse,rate=0.25", false);
  ASSERT_TRUE(flag.ok());
  EXPECT_TRUE(flag->refuse_connections);
  EXPECT_DOUBLE_EQ(flag->rate, 0.25);
  EXPECT_TRUE(parse_fault_spec("", true)->empty());
}

TEST(Faults, RejectsBadSpecsWithAReason) {
  struct Case {
    std::string spec;
    bool header;
    FaultError want;
  };
  const std::vector<Case> cases = {
      {"error=404", true, FaultError::kBadValue},
      {"error=", true, FaultError::kBadValue},
      {"drop_after=0", true, FaultError::kBadValue},
      {"stall=5", true, FaultError::kBadValue},
      {"stall=5ms@x", true, FaultError::kBadValue},
      {"slow_start=-1s", true, FaultError::kBadValue},
      {"refuse", true, FaultError::kNotAllowedHere},
      {"rate=0.5", true, FaultError::kNotAllowedHere},
      {"rate=1.5", false, FaultError::kBadValue},
      {"explode", true, FaultError::kSyntax},
      {std::string(2000, 'x'), true, FaultError::kTooLong},
      {"exit,exit,exit,exit,exit,exit,exit,exit,exit,exit,exit,exit,exit,exit,exit,exit,exit", true,
       FaultError::kTooLong},
  };
  for (const auto& c : cases) {
    auto p = parse_fault_spec(c.spec, c.header);
    ASSERT_FALSE(p.ok()) << c.spec;
    EXPECT_EQ(p.error().code, c.want) << c.spec;
    EXPECT_FALSE(p.error().message.empty());
  }
}

TEST(Faults, RateSelectsAStableFractionOfRequests) {
  FaultPlan p;
  p.error_status = 500;
  p.rate = 0.3;
  int hit = 0;
  for (int i = 0; i < 10'000; ++i) {
    const std::string id = "req-" + std::to_string(i);
    const bool a = fault_applies(p, id);
    EXPECT_EQ(a, fault_applies(p, id));
    hit += a ? 1 : 0;
  }
  EXPECT_NEAR(hit, 3000, 300);
}

TEST(Faults, HeaderOverridesFlag) {
  FaultPlan flag;
  flag.error_status = 503;
  flag.drop_after_events = 10;
  FaultPlan header;
  header.drop_after_events = 2;
  const FaultPlan m = merge_faults(flag, header);
  EXPECT_EQ(m.error_status, 503);
  EXPECT_EQ(m.drop_after_events, 2u);
}

}  // namespace
}  // namespace cgn::sim
