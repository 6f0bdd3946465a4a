#include "router/cascade/confidence.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace cgn::router::cascade {
namespace {

TEST(CascadeConfidence, MeanAcceptsAtOrAboveTheThresholdAndEscalatesBelow) {
  const std::vector<double> lps{-0.25, -0.5, -0.75};  // mean -0.5, exact in binary
  ConfidenceRule r{Statistic::kMean, -0.5, 0};
  Verdict v = judge(lps, r);
  ASSERT_TRUE(v.value.has_value());
  EXPECT_DOUBLE_EQ(*v.value, -0.5);
  EXPECT_EQ(v.tokens, 3u);
  EXPECT_TRUE(v.accepted);
  r.threshold = -0.49;
  EXPECT_FALSE(judge(lps, r).accepted);
}

TEST(CascadeConfidence, MinIsDecidedByTheLeastSureToken) {
  const std::vector<double> lps{-0.01, -0.01, -2.5, -0.01};
  const ConfidenceRule mean{Statistic::kMean, -1.0, 0};
  const ConfidenceRule min{Statistic::kMin, -1.0, 0};
  EXPECT_TRUE(judge(lps, mean).accepted);
  const Verdict v = judge(lps, min);
  EXPECT_FALSE(v.accepted);
  EXPECT_DOUBLE_EQ(*v.value, -2.5);
}

TEST(CascadeConfidence, FirstTokensLimitsTheWindow) {
  const std::vector<double> lps{-0.1, -0.1, -5.0, -5.0};
  ConfidenceRule r{Statistic::kMin, -1.0, 2};
  Verdict v = judge(lps, r);
  EXPECT_TRUE(v.accepted);
  EXPECT_EQ(v.tokens, 2u);
  r.first_tokens = 3;
  EXPECT_FALSE(judge(lps, r).accepted);
  r.first_tokens = 100;  // more than the answer has: all of it
  EXPECT_EQ(judge(lps, r).tokens, 4u);
}

TEST(CascadeConfidence, NoTokensIsNeverAccepted) {
  const ConfidenceRule r{Statistic::kMean, -100.0, 0};
  const Verdict v = judge({}, r);
  EXPECT_FALSE(v.accepted);
  EXPECT_FALSE(v.value.has_value());
}

TEST(CascadeConfidence, NanCountsAsNeverConfident) {
  const std::vector<double> lps{-0.1, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_FALSE(judge(lps, ConfidenceRule{Statistic::kMean, -100.0, 0}).accepted);
  EXPECT_FALSE(judge(lps, ConfidenceRule{Statistic::kMin, -100.0, 0}).accepted);
}

TEST(CascadeConfidence, RuleOfAConfiguredStep) {
  config::CascadeStepConfig st;
  st.model = "small";
  st.threshold = -0.4;
  EXPECT_EQ(rule_of(st).statistic, Statistic::kMean);
  EXPECT_EQ(rule_of(st).first_tokens, 0u);
  st.statistic = "min";
  st.first_tokens = 8;
  const ConfidenceRule r = rule_of(st);
  EXPECT_EQ(r.statistic, Statistic::kMin);
  EXPECT_DOUBLE_EQ(r.threshold, -0.4);
  EXPECT_EQ(r.first_tokens, 8u);
}

}  // namespace
}  // namespace cgn::router::cascade
