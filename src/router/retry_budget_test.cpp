#include "router/retry_budget.h"

#include <gtest/gtest.h>

namespace cgn::router {
namespace {

TEST(RetryBudget, a_second_close_before_any_answer_ends_the_request) {
  RetryBudget b;
  EXPECT_FALSE(b.marked());
  EXPECT_TRUE(b.allows_retry_after(AttemptFailure::kClosed));
  EXPECT_TRUE(b.marked());
  // Failures that say nothing about the request itself still move on.
  EXPECT_TRUE(b.allows_retry_after(AttemptFailure::kConnect));
  EXPECT_TRUE(b.allows_retry_after(AttemptFailure::kStatus5xx));
  EXPECT_TRUE(b.allows_retry_after(AttemptFailure::kStatus429));
  EXPECT_TRUE(b.allows_retry_after(AttemptFailure::kTimeout));
  EXPECT_FALSE(b.allows_retry_after(AttemptFailure::kClosed));
}

TEST(RetryBudget, refused_connects_and_busy_answers_keep_the_attempt_cap) {
  RetryBudget b;
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(b.allows_retry_after(AttemptFailure::kConnect));
    EXPECT_TRUE(b.allows_retry_after(AttemptFailure::kStatus429));
    EXPECT_TRUE(b.allows_retry_after(AttemptFailure::kStatus5xx));
  }
  EXPECT_FALSE(b.marked());
}

TEST(RetryBudget, an_agents_engine_closed_answer_counts_as_a_close) {
  http::Fields plain;
  EXPECT_EQ(failure_of_answer(502, plain), AttemptFailure::kStatus5xx);
  EXPECT_EQ(failure_of_answer(503, plain), AttemptFailure::kStatus5xx);
  EXPECT_EQ(failure_of_answer(429, plain), AttemptFailure::kStatus429);
  http::Fields marked;
  marked.set(http::kFailureHeader, http::kFailureEngineClosed);
  EXPECT_EQ(failure_of_answer(502, marked), AttemptFailure::kClosed);
  EXPECT_EQ(failure_of(http::HttpError::connect_failed), AttemptFailure::kConnect);
  EXPECT_EQ(failure_of(http::HttpError::timeout), AttemptFailure::kTimeout);
  EXPECT_EQ(failure_of(http::HttpError::closed), AttemptFailure::kClosed);
  EXPECT_EQ(reason_label(AttemptFailure::kClosed), "closed");
  EXPECT_EQ(reason_label(AttemptFailure::kStatus5xx), "status_5xx");
}

}  // namespace
}  // namespace cgn::router
