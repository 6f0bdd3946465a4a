#include "testing/metrics_page.h"

#include <gtest/gtest.h>

#include <cmath>

namespace cgn::testing {
namespace {

const char* const kPage =
    "# HELP cgn_router_retries_total Retries.\n"
    "# TYPE cgn_router_retries_total counter\n"
    "cgn_router_retries_total{model=\"m\",reason=\"connect\"} 2\n"
    "# HELP cgn_router_pd_handoff_seconds Hand-off time.\n"
    "# TYPE cgn_router_pd_handoff_seconds histogram\n"
    "cgn_router_pd_handoff_seconds_bucket{le=\"+Inf\"} 3\n"
    "cgn_router_pd_handoff_seconds_count 3\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 4\n"
    "cgn_up 1 1700000000000\n";

TEST(MetricsPage, ReadsASeriesByItsExactNameAndLabels) {
  EXPECT_EQ(metric(kPage, "cgn_router_retries_total{model=\"m\",reason=\"connect\"}"), 2.0);
  EXPECT_EQ(metric(kPage, "cgn_router_pd_handoff_seconds_count"), 3.0);
  EXPECT_EQ(metric(kPage, "cgn_up"), 1.0);  // a timestamp after the value is ignored
  EXPECT_FALSE(sample(kPage, "cgn_router_retries_total").has_value());  // labels are part of the name
}

TEST(MetricsPage, AMissingSeriesIsNeverZero) {
  EXPECT_TRUE(std::isnan(metric(kPage, "cgn_router_retrys_total{model=\"m\",reason=\"connect\"}")));
  EXPECT_FALSE(metric(kPage, "cgn_router_retrys_total") == 0.0);
  EXPECT_FALSE(metric(kPage, "cgn_router_retrys_total") >= 0.0);
}

TEST(MetricsPage, CountOrZeroAcceptsAMissingSeriesOnlyOfADeclaredFamily) {
  EXPECT_EQ(count_or_zero(kPage, "cgn_router_retries_total{model=\"m\",reason=\"closed\"}"), 0.0);
  EXPECT_EQ(count_or_zero(kPage, "cgn_router_retries_total{model=\"m\",reason=\"connect\"}"), 2.0);
  EXPECT_EQ(count_or_zero(kPage, "cgn_router_pd_handoff_seconds_sum"), 0.0);  // histogram family
  EXPECT_TRUE(std::isnan(count_or_zero(kPage, "cgn_router_retrys_total{model=\"m\",reason=\"closed\"}")));
  EXPECT_TRUE(std::isnan(count_or_zero(kPage, "cgn_router_pd_handoff_second_count")));
}

TEST(MetricsPage, FirstSampleOfAFamilyWhateverItsLabels) {
  EXPECT_EQ(first_sample(kPage, "vllm:num_requests_running"), 4.0);
  EXPECT_EQ(first_sample(kPage, "cgn_up"), 1.0);
  EXPECT_FALSE(first_sample(kPage, "vllm:num_requests").has_value());  // a prefix is not a family
  EXPECT_TRUE(declares_family(kPage, "vllm:num_requests_running"));
  EXPECT_FALSE(declares_family(kPage, "vllm:num_requests"));
}

}  // namespace
}  // namespace cgn::testing
