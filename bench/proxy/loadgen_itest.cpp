// Smoke test of cgn-loadgen's engine (loadgen.h) against the router's FakeEngine on loopback:
// every mode counts exactly the responses, events and streams the engine produced.
#include <gtest/gtest.h>
#include <unistd.h>

#include "bench/proxy/loadgen.h"
#include "router/fake_engine.h"
#include "testing/refusing_port.h"

namespace cgn::bench {
namespace {

using router::testing::FakeEngine;

LoadSpec spec_for(const FakeEngine& e, LoadMode mode) {
  LoadSpec s;
  s.mode = mode;
  s.port = e.port();
  s.body = chat_body(1024, mode == LoadMode::kStream || mode == LoadMode::kHold, "test-model");
  s.timeout_s = 60;
  return s;
}

TEST(ChatBody, HasTheRequestedSizeAndIsJson) {
  const std::string b = chat_body(1024, false, "m");
  EXPECT_EQ(b.size(), 1024u);
  EXPECT_FALSE(nlohmann::json::parse(b, nullptr, false).is_discarded());
  EXPECT_NE(chat_body(1024, true, "m").find("\"stream\":true"), std::string::npos);
}

TEST(Percentile, NearestRank) {
  EXPECT_EQ(percentile({}, 99), 0u);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 50), 3u);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 100), 5u);
  std::vector<uint64_t> v(1000);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = i + 1;
  }
  EXPECT_EQ(percentile(v, 99), 990u);
}

TEST(Loadgen, ClosedLoopCountsEveryResponse) {
  FakeEngine engine("e1");
  ASSERT_NE(engine.start(), 0);
  LoadSpec s = spec_for(engine, LoadMode::kClosed);
  s.connections = 8;
  s.max_requests = 300;
  auto r = run_load(s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->errors, 0u) << r->first_error;
  EXPECT_EQ(r->total_responses, 300u);
  EXPECT_EQ(r->requests, 300u);
  EXPECT_EQ(r->ok, 300u);
  EXPECT_EQ(r->latency_ns.size(), 300u);
  EXPECT_EQ(engine.generations.load(), 300);  // counted before it answers
  engine.stop();
}

TEST(Loadgen, CountsNon2xxApart) {
  FakeEngine engine("e1");
  ASSERT_NE(engine.start(), 0);
  engine.fail_next = 7;
  engine.fail_status = 503;
  LoadSpec s = spec_for(engine, LoadMode::kClosed);
  s.connections = 2;
  s.max_requests = 50;
  auto r = run_load(s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->errors, 0u) << r->first_error;
  EXPECT_EQ(r->non2xx, 7u);
  EXPECT_EQ(r->ok, 43u);
  engine.stop();
}

TEST(Loadgen, OpenLoopSendsTheScheduledRequests) {
  FakeEngine engine("e1");
  ASSERT_NE(engine.start(), 0);
  LoadSpec s = spec_for(engine, LoadMode::kOpen);
  s.connections = 16;
  s.rate = 2000;
  s.warmup_s = 0;
  s.duration_s = 0.2;  // 400 requests scheduled
  auto r = run_load(s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->errors, 0u) << r->first_error;
  EXPECT_EQ(r->requests, 400u);
  EXPECT_EQ(r->ok, 400u);
  EXPECT_EQ(engine.generations.load(), 400);  // counted before it answers
  engine.stop();
}

TEST(Loadgen, StreamsCountEveryEvent) {
  FakeEngine engine("e1");
  engine.tokens = 9;
  ASSERT_NE(engine.start(), 0);
  LoadSpec s = spec_for(engine, LoadMode::kStream);
  s.connections = 4;
  s.max_requests = 20;
  s.expect_events = 9;
  auto r = run_load(s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->errors, 0u) << r->first_error;
  EXPECT_EQ(r->requests, 20u);
  EXPECT_EQ(r->stream_ns.size(), 20u);
  EXPECT_EQ(engine.generations.load(), 20);  // counted before it answers

  s.expect_events = 10;  // a count mismatch is an error per stream
  s.max_requests = 3;
  auto wrong = run_load(s);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->errors, 3u);
  engine.stop();
}

TEST(Loadgen, HoldKeepsEveryStreamOpenThenCloses) {
  FakeEngine engine("e1");
  engine.tokens = 3;
  engine.token_delay_ms = 60'000;  // after the first event the streams stay open
  ASSERT_NE(engine.start(), 0);
  LoadSpec s = spec_for(engine, LoadMode::kHold);
  s.connections = 40;
  s.connect_batch = 8;
  s.hold_s = 0.05;
  s.rss_pid = static_cast<int>(::getpid());
  auto r = run_load(s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->held, 40u);
  EXPECT_EQ(r->errors, 0u) << r->first_error;
  EXPECT_GT(r->rss_before_kb, 0u);
  EXPECT_GT(r->rss_held_kb, 0u);
  engine.stop();
}

TEST(Loadgen, UnreachableTargetIsAnError) {
  const cgn::testing::RefusingPort refusing;
  LoadSpec s;
  s.port = refusing.port();
  s.body = chat_body(64, false, "m");
  s.connections = 2;
  s.max_requests = 1;
  auto r = run_load(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, LoadError::kConnect);
}

}  // namespace
}  // namespace cgn::bench
