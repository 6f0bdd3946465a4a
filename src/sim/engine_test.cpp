#include "sim/engine.h"

#include <gtest/gtest.h>

#include <numeric>

#include "sim/sim_testing.h"

namespace cgn::sim {
namespace {

using testing::concat;
using testing::find_completion;
using testing::make_prompt;
using testing::VirtualCluster;

Request make_request(std::vector<TokenId> prompt, uint32_t max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

// Runs one request alone from `at` and returns its completion.
Completion run_one(Engine& e, Request r, Nanos at) {
  VirtualCluster c;
  c.add(e);
  auto h = e.add_request(std::move(r), at);
  EXPECT_TRUE(h.ok());
  auto events = c.run_to_idle();
  const Completion* done = find_completion(events, *h);
  EXPECT_NE(done, nullptr);
  return done ? *done : Completion{};
}

TEST(Engine, RepeatedLongPromptReportsCachedTokensAndShorterTtft) {
  Engine e({});
  const NodeModel& m = e.config().model;
  const auto prompt = make_prompt(12'000, 1);
  const Completion first = run_one(e, make_request(prompt, 8), 0);
  const Completion second = run_one(e, make_request(prompt, 8), 100 * kNanosPerSecond);

  EXPECT_EQ(first.usage.cached_tokens, 0u);
  const uint32_t expect_cached = (12'000 - 1) / m.block_size * m.block_size;
  EXPECT_EQ(second.usage.cached_tokens, expect_cached);
  EXPECT_EQ(first.timing.ttft(), m.idle_ttft(12'000, 0));
  EXPECT_EQ(second.timing.ttft(), m.idle_ttft(12'000, expect_cached));
  EXPECT_LT(second.timing.ttft() * 10, first.timing.ttft());
  EXPECT_EQ(second.usage.prompt_tokens, 12'000u);
  EXPECT_EQ(second.usage.completion_tokens, 8u);
  EXPECT_EQ(e.stats().prefix_cache_queries, 24'000u);
  EXPECT_EQ(e.stats().prefix_cache_hits, expect_cached);
}

TEST(Engine, FirstTokenEventCarriesTheModelledTimingAndCachedTokensSoFar) {
  Engine e({});
  const auto prompt = make_prompt(4'000, 3);
  run_one(e, make_request(prompt, 4), 0);
  Request r = make_request(prompt, 4);
  r.want_token_events = true;
  const Nanos at = 50 * kNanosPerSecond;
  VirtualCluster c;
  c.add(e);
  auto h = e.add_request(std::move(r), at);
  ASSERT_TRUE(h.ok());
  const auto events = c.run_to_idle();
  const Completion* done = find_completion(events, *h);
  ASSERT_NE(done, nullptr);
  const Event* first = nullptr;
  for (const Event& ev : events) {
    if (ev.kind == EventKind::kToken && ev.token_index == 0) {
      first = &ev;
    }
  }
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->timing.arrival, at);
  EXPECT_EQ(first->timing.scheduled, done->timing.scheduled);
  EXPECT_EQ(first->timing.first_token, done->timing.first_token);
  EXPECT_EQ(first->timing.ttft(), done->timing.ttft());
  EXPECT_EQ(first->cached_tokens, done->usage.cached_tokens);
  EXPECT_GT(first->cached_tokens, 0u);
}

TEST(Engine, ChunkedPrefillSplitsALongPromptIntoBudgetSizedSteps) {
  EngineConfig cfg;
  std::vector<StepInfo> steps;
  cfg.on_step = [&steps](const StepInfo& s) { steps.push_back(s); };
  Engine e(std::move(cfg));
  const uint32_t budget = e.config().model.max_num_batched_tokens;
  run_one(e, make_request(make_prompt(2 * budget + 100, 2), 2), 0);
  ASSERT_GE(steps.size(), 4u);
  EXPECT_EQ(steps[0].prefill_tokens, budget);
  EXPECT_EQ(steps[1].prefill_tokens, budget);
  EXPECT_EQ(steps[2].prefill_tokens, 100u);
  EXPECT_EQ(steps[3].decode_seqs, 1u);
}

TEST(Engine, SameInstantBurstComputesASharedPrefixOnce) {
  // 48 prompts arrive together: a 6,000-token shared prefix (375 full blocks) and a 100-token
  // suffix of their own. The first request's step caches the prefix blocks it is about to
  // compute, so every sibling admitted after it, in the same step or later, hits them. Prompt
  // tokens computed: 6,100 + 47 x 100 = 10,800 (16,800 if the second request, admitted into
  // the first one's step, recomputed the whole prefix).
  EngineConfig cfg;
  uint64_t prefill_tokens = 0;
  cfg.on_step = [&prefill_tokens](const StepInfo& s) { prefill_tokens += s.prefill_tokens; };
  Engine e(std::move(cfg));
  ASSERT_EQ(e.config().model.block_size, 16u);
  const auto prefix = make_prompt(6'000, 7);
  std::vector<RequestHandle> hs;
  for (uint64_t i = 0; i < 48; ++i) {
    auto h = e.add_request(make_request(concat(prefix, make_prompt(100, 1'000 + i)), 4), 0);
    ASSERT_TRUE(h.ok());
    hs.push_back(*h);
  }
  VirtualCluster c;
  c.add(e);
  const auto events = c.run_to_idle();
  EXPECT_EQ(prefill_tokens, 10'800u);
  EXPECT_EQ(e.stats().prompt_tokens_computed, 10'800u);
  EXPECT_EQ(e.stats().prompt_tokens_cached, 47u * 6'000u);
  for (size_t i = 0; i < hs.size(); ++i) {
    const Completion* done = find_completion(events, hs[i]);
    ASSERT_NE(done, nullptr);
    EXPECT_EQ(done->usage.cached_tokens, i == 0 ? 0u : 6'000u) << "request " << i;
  }
}

TEST(Engine, ChunkedLeaderCachesExactlyTheFullBlocksScheduledSoFar) {
  // A 20,008-token leader behind a 100-token request prefills in three steps of the 8,192-token
  // budget: 8,092, 8,192, then 3,724 tokens. When each step starts, the cache holds the
  // leader's full blocks among the tokens scheduled so far and no more: 505 (8,092 = 505 x 16
  // + 12; the partial block is not cached), 1,017, 1,250. A sibling extending the leader's
  // prompt arrives during the second step, is admitted in the third beside the leader's last
  // chunk and hits all 1,250 blocks, including those that step computes.
  EngineConfig cfg;
  std::vector<StepInfo> steps;
  std::vector<uint32_t> leader_cached;
  const Engine* engine = nullptr;
  const auto leader = make_prompt(20'008, 11);
  cfg.on_step = [&](const StepInfo& s) {
    steps.push_back(s);
    leader_cached.push_back(engine->cached_prefix_blocks(leader));
  };
  Engine e(std::move(cfg));
  engine = &e;
  ASSERT_EQ(e.config().model.max_num_batched_tokens, 8'192u);
  ASSERT_TRUE(e.add_request(make_request(make_prompt(100, 12), 1), 0).ok());
  ASSERT_TRUE(e.add_request(make_request(leader, 2), 0).ok());
  e.advance_to(0);
  ASSERT_EQ(steps.size(), 1u);
  e.advance_to(steps[0].end);
  ASSERT_EQ(steps.size(), 2u);
  const Nanos mid_step_2 = steps[1].start + (steps[1].end - steps[1].start) / 2;
  auto sibling = e.add_request(make_request(concat(leader, make_prompt(492, 13)), 2), mid_step_2);
  ASSERT_TRUE(sibling.ok());
  VirtualCluster c;
  c.add(e);
  const auto events = c.run_to_idle();

  ASSERT_GE(steps.size(), 3u);
  EXPECT_EQ(steps[0].prefill_tokens, 8'192u);
  EXPECT_EQ(steps[1].prefill_tokens, 8'192u);
  EXPECT_EQ(steps[2].prefill_tokens, 3'724u + 500u);
  EXPECT_EQ(leader_cached[0], 505u);
  EXPECT_EQ(leader_cached[1], 1'017u);
  EXPECT_EQ(leader_cached[2], 1'250u);
  const Completion* done = find_completion(events, *sibling);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->timing.scheduled, steps[2].start);
  EXPECT_EQ(done->usage.cached_tokens, 20'000u);
}

TEST(Engine, KvEventsOfAStepComeOutWhenTheStepEnds) {
  // Blocks enter the cache when the step that computes them is scheduled; their BlockStored
  // event is published with the step's output, once it has completed. An admin eviction on an
  // idle engine comes out at once.
  EngineConfig cfg;
  cfg.record_kv_events = true;
  Engine e(std::move(cfg));
  const auto prompt = make_prompt(160, 21);  // 10 full blocks
  ASSERT_TRUE(e.add_request(make_request(prompt, 2), 0).ok());
  e.advance_to(0);
  EXPECT_EQ(e.cached_prefix_blocks(prompt), 10u);
  std::vector<KvCacheEvent> evs;
  e.take_kv_events(evs);
  EXPECT_TRUE(evs.empty());
  e.advance_to(e.next_event_time());  // the prefill step completes; the decode step starts
  e.take_kv_events(evs);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, KvCacheEvent::Kind::kStored);
  std::vector<BlockHash> want;
  extend_block_hashes(prompt, e.config().model.block_size, want);
  EXPECT_EQ(evs[0].hashes, want);
  VirtualCluster c;
  c.add(e);
  c.run_to_idle();
  evs.clear();
  e.take_kv_events(evs);
  EXPECT_TRUE(evs.empty());  // the reply's 2 tokens fill no new block
  EXPECT_EQ(e.evict_all(c.now()), 10u);
  e.take_kv_events(evs);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, KvCacheEvent::Kind::kAllCleared);
}

TEST(Engine, ContinuousBatchingRespectsMaxNumSeqsAndTokenBudget) {
  EngineConfig cfg;
  cfg.model.max_num_seqs = 8;
  cfg.model.max_num_batched_tokens = 512;
  std::vector<StepInfo> steps;
  cfg.on_step = [&steps](const StepInfo& s) { steps.push_back(s); };
  Engine e(std::move(cfg));
  VirtualCluster c;
  c.add(e);
  for (uint64_t i = 0; i < 40; ++i) {
    ASSERT_TRUE(
        e.add_request(make_request(make_prompt(300, 100 + i), 20), static_cast<Nanos>(i) * kNanosPerMilli)
            .ok());
  }
  const auto events = c.run_to_idle();
  uint32_t max_seqs = 0;
  for (const auto& s : steps) {
    EXPECT_LE(s.num_seqs, 8u);
    EXPECT_LE(s.prefill_tokens + s.decode_seqs, 512u);
    max_seqs = std::max(max_seqs, s.num_seqs);
  }
  EXPECT_EQ(max_seqs, 8u);  // the cap was reached, so the check above meant something
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const Event& ev) { return ev.kind == EventKind::kFinished; }),
            40);
}

TEST(Engine, QueueingUnderLoadGrowsTtft) {
  EngineConfig cfg;
  cfg.model.max_num_seqs = 2;
  Engine e(std::move(cfg));
  VirtualCluster c;
  c.add(e);
  std::vector<RequestHandle> hs;
  for (uint64_t i = 0; i < 6; ++i) {
    hs.push_back(*e.add_request(make_request(make_prompt(1000, 200 + i), 50), 0));
  }
  EXPECT_EQ(e.gauges().waiting, 6u);
  const auto events = c.run_to_idle();
  std::vector<const Completion*> done;
  for (auto h : hs) {
    done.push_back(find_completion(events, h));
    ASSERT_NE(done.back(), nullptr);
  }
  EXPECT_EQ(done[0]->timing.queue_time(), 0);
  EXPECT_GT(done[2]->timing.queue_time(), 0);
  EXPECT_GT(done[4]->timing.queue_time(), done[2]->timing.queue_time());
  EXPECT_GT(done[4]->timing.ttft(), done[2]->timing.ttft());
  EXPECT_GT(done[2]->timing.ttft(), done[0]->timing.ttft());
}

TEST(Engine, InterTokenLatencyFollowsTheStepModelAndGrowsWithBatch) {
  auto itl_for_batch = [](uint32_t batch) {
    Engine e({});
    VirtualCluster c;
    c.add(e);
    std::vector<RequestHandle> hs;
    for (uint32_t i = 0; i < batch; ++i) {
      hs.push_back(*e.add_request(make_request(make_prompt(64, 300 + i), 10), 0));
    }
    const auto events = c.run_to_idle();
    // Token 5 -> 6 of the first request: a pure decode step of `batch` seqs.
    Nanos t5 = 0, t6 = 0;
    for (const auto& ev : events) {
      if (ev.kind == EventKind::kToken && ev.handle == hs[0] && ev.token_index == 5)
        t5 = ev.time;
      if (ev.kind == EventKind::kToken && ev.handle == hs[0] && ev.token_index == 6)
        t6 = ev.time;
    }
    // Context during that step: 64 prompt + 6 generated tokens per seq.
    EXPECT_EQ(t6 - t5, e.config().model.decode_itl(batch, 64 + 6));
    return t6 - t5;
  };
  const Nanos one = itl_for_batch(1);
  const Nanos many = itl_for_batch(64);
  EXPECT_GT(many, one);
}

TEST(Engine, TimeScaleShrinksEveryModelledDuration) {
  EngineConfig fast;
  fast.time_scale = 0.1;
  Engine slow_engine({});
  Engine fast_engine(std::move(fast));
  const Completion a = run_one(slow_engine, make_request(make_prompt(3000, 5), 4), 0);
  const Completion b = run_one(fast_engine, make_request(make_prompt(3000, 5), 4), 0);
  EXPECT_NEAR(static_cast<double>(b.timing.ttft()), 0.1 * static_cast<double>(a.timing.ttft()), 4.0);
  EXPECT_NEAR(static_cast<double>(b.timing.e2e()), 0.1 * static_cast<double>(a.timing.e2e()), 10.0);
}

TEST(Engine, EvictionUnderPressureDropsOldPrefixes) {
  EngineConfig cfg;
  cfg.model.num_gpu_blocks = 64;
  Engine e(std::move(cfg));
  const auto a = make_prompt(40 * 16, 1);
  const auto b = make_prompt(40 * 16, 2);
  run_one(e, make_request(a, 1), 0);
  EXPECT_EQ(e.cached_prefix_blocks(a), 40u);
  run_one(e, make_request(b, 1), kNanosPerSecond);  // needs 41 blocks: evicts most of a
  EXPECT_EQ(e.cached_prefix_blocks(b), 40u);
  EXPECT_LT(e.cached_prefix_blocks(a), 40u);
  const Completion again = run_one(e, make_request(a, 1), 2 * kNanosPerSecond);
  EXPECT_LT(again.usage.cached_tokens, 39u * 16u);
  EXPECT_GT(e.pool().counters().evictions, 0u);
}

TEST(Engine, EvictionOnDemandAllOrOnePrefix) {
  Engine e({});
  const auto a = make_prompt(320, 1);
  const auto b = make_prompt(320, 2);
  run_one(e, make_request(a, 1), 0);
  run_one(e, make_request(b, 1), kNanosPerSecond);
  EXPECT_EQ(e.evict_prefix(a, 2 * kNanosPerSecond), 20u);
  EXPECT_EQ(e.cached_prefix_blocks(a), 0u);
  EXPECT_EQ(e.cached_prefix_blocks(b), 20u);
  EXPECT_GT(e.evict_all(3 * kNanosPerSecond), 0u);
  EXPECT_EQ(e.cached_prefix_blocks(b), 0u);
  const Completion c = run_one(e, make_request(b, 1), 4 * kNanosPerSecond);
  EXPECT_EQ(c.usage.cached_tokens, 0u);
}

TEST(Engine, GeneratedReplyIsCachedWithItsPrompt) {
  Engine e({});
  std::vector<ChatMessage> turn1 = {{"user", std::string(600, 'q') + "?"}};
  Request r1 = make_request(encode(render_chat(turn1)), 64);
  const uint32_t p1 = static_cast<uint32_t>(r1.prompt.size());
  const Completion c1 = run_one(e, std::move(r1), 0);
  ASSERT_EQ(c1.text.size(), 64u * 4u);
  std::vector<ChatMessage> turn2 = turn1;
  turn2.push_back({"assistant", c1.text});
  turn2.push_back({"user", "more"});
  const Completion c2 = run_one(e, make_request(encode(render_chat(turn2)), 4), kNanosPerSecond);
  // Every full block of prompt + reply except the last generated token is cached.
  const uint32_t bs = e.config().model.block_size;
  EXPECT_EQ(c2.usage.cached_tokens, (p1 + 64 - 1) / bs * bs);
  EXPECT_GT(c2.usage.cached_tokens, p1);
}

TEST(Engine, PreemptsByRecomputeWhenThePoolRunsOut) {
  EngineConfig cfg;
  cfg.model.num_gpu_blocks = 24;
  Engine e(std::move(cfg));
  VirtualCluster c;
  c.add(e);
  auto h1 = *e.add_request(make_request(make_prompt(100, 1), 150), 0);
  auto h2 = *e.add_request(make_request(make_prompt(100, 2), 150), 0);
  const auto events = c.run_to_idle();
  ASSERT_NE(find_completion(events, h1), nullptr);
  ASSERT_NE(find_completion(events, h2), nullptr);
  EXPECT_GT(e.stats().preemptions, 0u);
  EXPECT_EQ(find_completion(events, h1)->usage.completion_tokens, 150u);
  EXPECT_EQ(find_completion(events, h2)->usage.completion_tokens, 150u);
  EXPECT_GT(find_completion(events, h2)->preemptions, 0u);
  EXPECT_EQ(e.gauges().used_blocks, 0u);
}

TEST(Engine, StopTokenEndsWithStopAndLengthCapEndsWithLength) {
  Engine e({});
  Request stop = make_request(make_prompt(50, 1), 20);
  stop.ignore_eos = false;
  stop.eos_at = 5;
  const Completion s = run_one(e, std::move(stop), 0);
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.usage.completion_tokens, 5u);
  EXPECT_EQ(s.text.size(), 4u * 4u);  // the stop token has no text
  const Completion l = run_one(e, make_request(make_prompt(50, 2), 7), kNanosPerSecond);
  EXPECT_EQ(l.reason, FinishReason::kLength);
  EXPECT_EQ(l.usage.completion_tokens, 7u);
}

TEST(Engine, RandomRepliesAreDeterministicFromTheSeed) {
  Engine e1({}), e2({});
  Request a = make_request(make_prompt(40, 1), 30);
  a.seed = 99;
  Request b = a;
  const Completion x = run_one(e1, std::move(a), 0);
  const Completion y = run_one(e2, std::move(b), 0);
  EXPECT_EQ(x.text, y.text);
  Request c = make_request(make_prompt(40, 1), 30);
  c.seed = 100;
  EXPECT_NE(run_one(e1, std::move(c), kNanosPerSecond).text, x.text);
}

TEST(Engine, EchoModeRepliesWithTheGivenText) {
  Engine e({});
  Request r = make_request(make_prompt(40, 1), 100);
  r.ignore_eos = false;
  r.reply_mode = ReplyMode::kEcho;
  r.echo_text = "repeat after me\nplease";
  const Completion c = run_one(e, std::move(r), 0);
  EXPECT_EQ(c.text, "repeat after me\nplease");
  EXPECT_EQ(c.reason, FinishReason::kStop);
  EXPECT_EQ(c.usage.completion_tokens, encode("repeat after me\nplease").size() + 1);
}

TEST(Engine, TokenEventsCarryTextAndTimes) {
  Engine e({});
  VirtualCluster c;
  c.add(e);
  auto h = *e.add_request(make_request(make_prompt(40, 1), 5), 0);
  const auto events = c.run_to_idle();
  std::string text;
  Nanos last = -1;
  uint32_t n = 0;
  for (const auto& ev : events) {
    if (ev.kind == EventKind::kToken && ev.handle == h) {
      EXPECT_EQ(ev.token_index, n++);
      EXPECT_GT(ev.time, last);
      last = ev.time;
      text += ev.text;
    }
  }
  EXPECT_EQ(n, 5u);
  EXPECT_EQ(text, find_completion(events, h)->text);
  EXPECT_EQ(find_completion(events, h)->timing.first_token, events.front().time);
}

TEST(Engine, AbortFreesBlocksAndCountsAbort) {
  Engine e({});
  VirtualCluster c;
  c.add(e);
  auto h = *e.add_request(make_request(make_prompt(4000, 1), 500), 0);
  c.run_until(2 * kNanosPerSecond);
  EXPECT_GT(e.gauges().used_blocks, 0u);
  e.abort(h, 2 * kNanosPerSecond);
  std::vector<Event> evs;
  e.take_events(evs);
  const Completion* done = find_completion(evs, h);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->reason, FinishReason::kAbort);
  EXPECT_EQ(e.gauges().used_blocks, 0u);
  EXPECT_EQ(e.gauges().running, 0u);
  EXPECT_EQ(e.stats().finished[static_cast<size_t>(Finished::kAbort)], 1u);
  c.run_to_idle();  // the step in flight when the client left still completes
  EXPECT_EQ(e.next_event_time(), kNever);
}

TEST(Engine, FaultFailsBeforeTheFirstToken) {
  Engine e({});
  Request r = make_request(make_prompt(100, 1), 5);
  r.fail_before_first_token = 503;
  VirtualCluster c;
  c.add(e);
  auto h = *e.add_request(std::move(r), 0);
  const auto events = c.run_to_idle();
  for (const auto& ev : events) {
    EXPECT_NE(ev.kind, EventKind::kToken);
  }
  const Completion* done = find_completion(events, h);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->reason, FinishReason::kError);
  EXPECT_EQ(done->error_status, 503);
  EXPECT_EQ(e.gauges().used_blocks, 0u);
}

TEST(Engine, RejectsWhatARealEngineRejects) {
  EngineConfig cfg;
  cfg.max_waiting = 2;
  cfg.model.max_model_len = 1000;
  Engine e(std::move(cfg));
  auto too_long = e.add_request(make_request(make_prompt(990, 1), 20), 0);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, EngineError::kContextLength);
  EXPECT_NE(too_long.error().message.find("maximum context length is 1000"), std::string::npos);
  auto empty = e.add_request(make_request({}, 20), 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, EngineError::kInvalidRequest);
  ASSERT_TRUE(e.add_request(make_request(make_prompt(10, 1), 20), 0).ok());
  ASSERT_TRUE(e.add_request(make_request(make_prompt(10, 2), 20), 0).ok());
  auto full = e.add_request(make_request(make_prompt(10, 3), 20), 0);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, EngineError::kQueueFull);
  EXPECT_EQ(http_status(full.error().code), 429);
  EXPECT_EQ(http_status(too_long.error().code), 400);
}

TEST(Engine, IdleEngineHasNothingScheduled) {
  Engine e({});
  EXPECT_EQ(e.next_event_time(), kNever);
  e.advance_to(10 * kNanosPerSecond);
  std::vector<Event> evs;
  e.take_events(evs);
  EXPECT_TRUE(evs.empty());
}

}  // namespace
}  // namespace cgn::sim
