// Unit tests of the live load generator's pure parts: target parsing, the arrival schedule,
// stream chunk parsing (shapes of vLLM's and the router's SSE payloads), and the summary.
#include "bench_harness/load/load_gen.h"

#include <gtest/gtest.h>

namespace cgn::bench {
namespace {

Workload three_requests() {
  Workload w;
  w.name = "t";
  for (int i = 0; i < 3; ++i) {
    WorkRequest r;
    r.arrival = 5'000'000'000LL + i * 2'000'000'000LL;  // 5 s, 7 s, 9 s
    r.segments.push_back({static_cast<uint64_t>(i), kBlockBytes});
    r.output_tokens = 4;
    w.requests.push_back(r);
  }
  return w;
}

TEST(LoadTarget, ParsesLabelAndUrl) {
  auto t = parse_target("kv=http://127.0.0.1:8080");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->policy, "kv");
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, 8080);
  auto u = parse_target("http://10.0.0.1:9/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->policy, "live");
  EXPECT_EQ(u->port, 9);
}

TEST(LoadTarget, RejectsWhatItCannotUse) {
  for (const char* bad : {"", "127.0.0.1:80", "https://h:1", "kv=http://h", "http://h:0", "http://h:70000",
                          "http://h:1/v1", "=http://h:1", "http://:1", "http://h:x1"}) {
    auto t = parse_target(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok()) {
      EXPECT_EQ(t.error().code, LoadError::kBadTarget);
      EXPECT_FALSE(t.error().message.empty());
    }
  }
}

TEST(LoadSchedule, ScalesTraceTimesFromTheFirstArrival) {
  LoadOptions o;
  o.arrival_scale = 0.5;
  const auto due = arrival_schedule(three_requests(), o);
  ASSERT_EQ(due.size(), 3u);
  EXPECT_EQ(due[0], 0);
  EXPECT_EQ(due[1], 1'000'000'000);
  EXPECT_EQ(due[2], 2'000'000'000);
}

TEST(LoadSchedule, FixedRateCountAndDurationBounds) {
  LoadOptions o;
  o.rate_rps = 4;
  auto due = arrival_schedule(three_requests(), o);
  ASSERT_EQ(due.size(), 3u);
  EXPECT_EQ(due[1], 250'000'000);
  o.max_requests = 2;
  EXPECT_EQ(arrival_schedule(three_requests(), o).size(), 2u);
  o.max_requests = 0;
  o.duration_s = 0.3;  // the third request would be due at 0.5 s
  EXPECT_EQ(arrival_schedule(three_requests(), o).size(), 2u);
}

TEST(LoadOptionsCheck, RejectsNonsense) {
  LoadOptions o;
  EXPECT_TRUE(validate(o).ok());
  o.engine_time_scale = 0;
  EXPECT_FALSE(validate(o).ok());
  o = LoadOptions{};
  o.rate_rps = -1;
  EXPECT_FALSE(validate(o).ok());
  o = LoadOptions{};
  o.model.clear();
  EXPECT_FALSE(validate(o).ok());
}

TEST(StreamChunk, CompletionTokenChunk) {
  auto c = parse_stream_chunk(
      R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the",)"
      R"("logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":null}],"usage":null})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->text_pieces, 1u);
  EXPECT_FALSE(c->has_usage);
  EXPECT_FALSE(c->error);
}

TEST(StreamChunk, ChatRoleChunkIsNotAToken) {
  auto c = parse_stream_chunk(
      R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text_pieces, 0u);
  auto d = parse_stream_chunk(R"({"choices":[{"index":0,"delta":{"content":" cat"}}]})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->text_pieces, 1u);
}

TEST(StreamChunk, FinalUsageChunkCarriesCachedTokens) {
  auto c = parse_stream_chunk(
      R"({"id":"x","object":"text_completion","choices":[],"usage":{"prompt_tokens":3600,"total_tokens":3800,)"
      R"("completion_tokens":200,"prompt_tokens_details":{"cached_tokens":3008}}})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->has_usage);
  EXPECT_TRUE(c->has_cached);
  EXPECT_EQ(c->prompt_tokens, 3600u);
  EXPECT_EQ(c->completion_tokens, 200u);
  EXPECT_EQ(c->cached_tokens, 3008u);
  auto n = parse_stream_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":null}})");
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->has_usage);
  EXPECT_FALSE(n->has_cached);
}

TEST(StreamChunk, ErrorEventsInBothShapes) {
  auto a =
      parse_stream_chunk(R"({"error":{"message":"The node 'a' failed mid-stream","type":"x","code":502}})");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->error);
  EXPECT_EQ(a->error_message, "The node 'a' failed mid-stream");
  auto b = parse_stream_chunk(R"({"object":"error","message":"boom","type":"x","code":500})");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->error);
  EXPECT_EQ(b->error_message, "boom");
}

// Found by fuzz_load_gen_stream: a non-string error message threw out of json::value(), and a
// count above INT64_MAX was called negative.
TEST(StreamChunk, OddButValidValuesAreNotThrownOrMisread) {
  auto a = parse_stream_chunk(R"({"object":"error","message":42})");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->error);
  EXPECT_EQ(a->error_message, "error");
  auto b = parse_stream_chunk(R"({"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":2}})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->prompt_tokens, 18446744073709551615ULL);
  EXPECT_EQ(b->completion_tokens, 2u);
}

TEST(StreamChunk, MalformedIsAnErrorNamingTheField) {
  EXPECT_FALSE(parse_stream_chunk("{").ok());
  EXPECT_FALSE(parse_stream_chunk("[1]").ok());
  auto c = parse_stream_chunk(R"({"choices":{}})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("choices"), std::string::npos);
  auto u = parse_stream_chunk(R"({"usage":{"prompt_tokens":-3}})");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.error().message.find("usage.prompt_tokens"), std::string::npos);
  auto d = parse_stream_chunk(R"({"usage":{"prompt_tokens_details":{"cached_tokens":"7"}}})");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("cached_tokens"), std::string::npos);
  EXPECT_FALSE(parse_stream_chunk(R"({"choices":[{"text":5}]})").ok());
}

RequestRecord completed(Nanos due, Nanos first, Nanos last, uint64_t prompt, uint64_t cached,
                        std::string node) {
  RequestRecord r;
  r.outcome = Outcome::kCompleted;
  r.status = 200;
  r.due = due;
  r.sent = due + 1'000'000;  // 1 ms late
  r.first_token = first;
  r.last_token = last;
  r.done = last;
  r.text_events = 5;
  r.usage_seen = true;
  r.cached_seen = true;
  r.prompt_tokens = prompt;
  r.completion_tokens = 5;
  r.cached_tokens = cached;
  r.node = std::move(node);
  return r;
}

TEST(LoadSummary, CountsEveryOutcomeAndScalesTimes) {
  std::vector<RequestRecord> recs;
  // TTFT 0.2 s and 0.4 s wall; 4 gaps of 0.1 s wall => ITL 0.025 s wall.
  recs.push_back(completed(0, 200'000'000, 300'000'000, 1000, 500, "b"));
  recs.push_back(completed(1'000'000'000, 1'400'000'000, 1'500'000'000, 1000, 0, "a"));
  RequestRecord shed;
  shed.outcome = Outcome::kShed;
  shed.status = 429;
  shed.due = 1'100'000'000;
  shed.sent = shed.due;
  shed.done = shed.due + 1'000'000;
  recs.push_back(shed);
  RequestRecord err = shed;
  err.outcome = Outcome::kTransportError;
  err.status = 0;
  err.error = "connect failed";
  recs.push_back(err);
  RequestRecord unsent;  // never sent: not counted
  recs.push_back(unsent);
  LoadOptions o;
  o.engine_time_scale = 0.5;  // the engines ran twice as fast: model seconds = wall * 2
  o.slo_ttft_s = 0.5;
  o.slo_itl_s = 1;
  const LoadResult r = summarise("kv", recs, o);
  EXPECT_EQ(r.result.policy, "kv");
  EXPECT_EQ(r.live.sent, 4u);
  EXPECT_EQ(r.result.requests, 4u);
  EXPECT_EQ(r.result.completed, 2u);
  EXPECT_EQ(r.result.shed, 1u);
  EXPECT_EQ(r.result.errors, 1u);
  EXPECT_EQ(r.result.completed + r.result.errors + r.result.shed, r.result.requests);
  EXPECT_EQ(r.live.transport_errors, 1u);
  EXPECT_NE(r.live.first_error.find("connect failed"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.result.ttft_p50_s, 0.4);
  EXPECT_DOUBLE_EQ(r.result.ttft_p90_s, 0.8);
  EXPECT_DOUBLE_EQ(r.result.itl_p50_s, 0.05);
  EXPECT_DOUBLE_EQ(r.result.hit_rate, 0.25);
  EXPECT_EQ(r.result.prompt_tokens, 2000u);
  EXPECT_EQ(r.result.cached_tokens, 500u);
  // Makespan: due 0 to the last end 1.5 s wall = 3 model seconds; one request met the SLOs.
  EXPECT_DOUBLE_EQ(r.result.makespan_s, 3.0);
  EXPECT_DOUBLE_EQ(r.result.goodput_rps, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.result.output_tok_s, 10.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.live.max_send_lag_s, 0.001);
  ASSERT_EQ(r.live.nodes.size(), 2u);
  EXPECT_EQ(r.live.nodes[0], "a");
  EXPECT_EQ(r.result.per_node_requests, (std::vector<uint64_t>{1, 1}));
}

TEST(LoadSummary, MissingUsageIsCountedNotGuessed) {
  RequestRecord a = completed(0, 10, 20, 100, 50, "n");
  a.usage_seen = false;
  a.cached_seen = false;
  RequestRecord b = completed(0, 10, 20, 100, 0, "n");
  b.cached_seen = false;
  const LoadResult r = summarise("x", {a, b}, LoadOptions{});
  EXPECT_EQ(r.live.usage_missing, 1u);
  EXPECT_EQ(r.live.cached_missing, 1u);
  EXPECT_EQ(r.result.prompt_tokens, 100u);  // only b's usage counts
  EXPECT_EQ(r.result.cached_tokens, 0u);
}

}  // namespace
}  // namespace cgn::bench
