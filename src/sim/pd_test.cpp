// The vLLM NixlConnector P/D protocol between two simulated instances, in
// virtual time (the HTTP shell carries the same calls over loopback).
#include <gtest/gtest.h>

#include "sim/engine.h"
#include "sim/sim_testing.h"

namespace cgn::sim {
namespace {

using testing::find_completion;
using testing::make_prompt;
using testing::VirtualCluster;

EngineConfig named(std::string id, int port) {
  EngineConfig c;
  c.engine_id = std::move(id);
  c.side_channel_host = "127.0.0.1";
  c.side_channel_port = port;
  return c;
}

// The router's prefill leg (docs/design/principles.md): max_tokens 1, stream false, do_remote_decode.
Request prefill_leg(const std::vector<TokenId>& prompt, std::string id) {
  Request r;
  r.external_id = std::move(id);
  r.prompt = prompt;
  r.max_tokens = 1;
  r.kv_transfer = KvTransferParams{};
  r.kv_transfer->do_remote_decode = true;
  return r;
}

Request decode_leg(const std::vector<TokenId>& prompt, const std::optional<KvTransferParams>& params,
                   uint32_t max_tokens) {
  Request r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.kv_transfer = params;
  return r;
}

struct Pair {
  Engine p{named("prefill-0", 5600)};
  Engine d{named("decode-0", 5700)};
  VirtualCluster cluster;
  Pair() {
    cluster.add(p);
    cluster.add(d);
  }
  Completion run(Engine& e, Request r, Nanos at) {
    auto h = e.add_request(std::move(r), at);
    EXPECT_TRUE(h.ok());
    const auto events = cluster.run_until(at + 60 * kNanosPerSecond);  // well before the 480 s hold timeout
    const Completion* c = find_completion(events, *h);
    EXPECT_NE(c, nullptr);
    return c ? *c : Completion{};
  }
};

TEST(PrefillDecode, RoundTripTransfersTheBlocksInsteadOfPrefilling) {
  Pair s;
  const auto prompt = make_prompt(5000, 1);
  const Completion pre = s.run(s.p, prefill_leg(prompt, "req-1"), 0);
  ASSERT_EQ(pre.reason, FinishReason::kLength);
  ASSERT_TRUE(pre.kv_transfer_params.has_value());
  const KvTransferParams& kv = *pre.kv_transfer_params;
  EXPECT_TRUE(kv.do_remote_prefill);
  EXPECT_FALSE(kv.do_remote_decode);
  EXPECT_EQ(kv.remote_block_ids->size(), 5000u / 16u);  // full blocks only
  EXPECT_EQ(*kv.remote_engine_id, "prefill-0");
  EXPECT_EQ(*kv.remote_request_id, "req-1");
  EXPECT_EQ(*kv.remote_host, "127.0.0.1");
  EXPECT_EQ(*kv.remote_port, 5600);
  EXPECT_EQ(kv.tp_size, 1);
  // The prefill side holds the blocks until they are claimed.
  EXPECT_EQ(s.p.gauges().held_handoffs, 1u);
  EXPECT_EQ(s.p.gauges().used_blocks, (5000u + 15u) / 16u);

  const Nanos t1 = pre.timing.finished;
  const Completion dec = s.run(s.d, decode_leg(prompt, pre.kv_transfer_params, 20), t1);
  ASSERT_EQ(s.cluster.pull_results().size(), 1u);
  EXPECT_EQ(s.cluster.pull_results()[0], ClaimStatus::kOk);
  EXPECT_FALSE(dec.kv_pull_failed);
  EXPECT_EQ(dec.transferred_tokens, 5000u / 16u * 16u);
  EXPECT_EQ(dec.usage.cached_tokens, 5000u / 16u * 16u);
  EXPECT_EQ(dec.usage.completion_tokens, 20u);
  // TTFT = transfer + prefill of the 8-token tail, far below a full prefill.
  const NodeModel& m = s.d.config().model;
  EXPECT_GE(dec.timing.ttft(), m.kv_transfer_time(dec.transferred_tokens));
  EXPECT_LT(dec.timing.ttft() * 3, m.idle_ttft(5000, 0));
  EXPECT_EQ(s.p.gauges().held_handoffs, 0u);
  EXPECT_EQ(s.p.gauges().used_blocks, 0u);
  EXPECT_EQ(s.p.stats().kv_handoffs_claimed, 1u);
  EXPECT_EQ(s.d.stats().kv_pulls_ok, 1u);
  // The freed prefill blocks stay prefix-cached on the prefill instance.
  EXPECT_EQ(s.p.cached_prefix_blocks(prompt), 5000u / 16u);
}

TEST(PrefillDecode, PulledBlocksEnterThePrefixCacheOnlyOnceTheTransferLands) {
  // The decode leg's blocks are allocated when it is admitted but hold nothing until the pull
  // lands, so they are cached then, not when allocated: a request arriving during the transfer
  // with the same first 2,000 tokens hits none of them and prefills its prompt itself.
  Pair s;
  const auto prompt = make_prompt(5000, 31);  // 312 full blocks + an 8-token tail
  const Completion pre = s.run(s.p, prefill_leg(prompt, "req-l"), 0);
  ASSERT_TRUE(pre.kv_transfer_params.has_value());
  const Nanos t1 = pre.timing.finished;
  auto dec = s.d.add_request(decode_leg(prompt, pre.kv_transfer_params, 4), t1);
  ASSERT_TRUE(dec.ok());
  s.cluster.run_until(t1);  // admitted, blocks claimed, transfer under way
  ASSERT_EQ(s.cluster.pull_results().size(), 1u);
  ASSERT_EQ(s.cluster.pull_results()[0], ClaimStatus::kOk);
  EXPECT_EQ(s.d.gauges().waiting_for_kv, 1u);
  EXPECT_EQ(s.d.cached_prefix_blocks(prompt), 0u);

  const Nanos transfer = s.d.config().model.kv_transfer_time(312u * 16u);
  const std::vector<TokenId> head(prompt.begin(), prompt.begin() + 2000);
  auto sibling = s.d.add_request(decode_leg(testing::concat(head, make_prompt(100, 32)), std::nullopt, 4),
                                 t1 + transfer / 2);
  ASSERT_TRUE(sibling.ok());
  auto events = s.cluster.run_until(t1 + transfer);  // the pull lands
  EXPECT_EQ(s.d.cached_prefix_blocks(prompt), 312u);
  const auto rest = s.cluster.run_until(t1 + 60 * kNanosPerSecond);
  events.insert(events.end(), rest.begin(), rest.end());
  const Completion* sc = find_completion(events, *sibling);
  ASSERT_NE(sc, nullptr);
  EXPECT_EQ(sc->usage.cached_tokens, 0u);
  const Completion* dc = find_completion(events, *dec);
  ASSERT_NE(dc, nullptr);
  EXPECT_EQ(dc->transferred_tokens, 312u * 16u);
}

TEST(PrefillDecode, StopAsFirstTokenReturnsNoParamsAndDecodeRecomputes) {
  Pair s;
  const auto prompt = make_prompt(800, 2);
  Request r = prefill_leg(prompt, "req-stop");
  r.eos_at = 1;
  const Completion pre = s.run(s.p, std::move(r), 0);
  EXPECT_EQ(pre.reason, FinishReason::kStop);
  EXPECT_FALSE(pre.kv_transfer_params.has_value());
  EXPECT_EQ(s.p.gauges().held_handoffs, 0u);
  EXPECT_EQ(s.p.gauges().used_blocks, 0u);
  const Completion dec = s.run(s.d, decode_leg(prompt, std::nullopt, 4), pre.timing.finished);
  EXPECT_TRUE(s.cluster.pull_results().empty());
  EXPECT_EQ(dec.transferred_tokens, 0u);
  EXPECT_EQ(dec.timing.ttft(), s.d.config().model.idle_ttft(800, 0));
}

TEST(PrefillDecode, ExpiredHandoffIsFreedAndDecodeRecomputes) {
  EngineConfig pc = named("prefill-0", 5600);
  pc.kv_abort_timeout = 2 * kNanosPerSecond;
  Engine p(std::move(pc));
  Engine d(named("decode-0", 5700));
  VirtualCluster cluster;
  cluster.add(p);
  cluster.add(d);
  const auto prompt = make_prompt(3000, 3);
  auto hp = *p.add_request(prefill_leg(prompt, "req-late"), 0);
  auto events = cluster.run_until(10 * kNanosPerSecond);
  const Completion* pre = find_completion(events, hp);
  ASSERT_NE(pre, nullptr);
  ASSERT_TRUE(pre->kv_transfer_params.has_value());
  EXPECT_EQ(p.gauges().held_handoffs, 0u);  // the 2 s timeout passed
  EXPECT_EQ(p.stats().kv_handoffs_expired, 1u);
  EXPECT_EQ(p.gauges().used_blocks, 0u);

  auto hd = *d.add_request(decode_leg(prompt, pre->kv_transfer_params, 5), 10 * kNanosPerSecond);
  events = cluster.run_to_idle();
  const Completion* dec = find_completion(events, hd);
  ASSERT_NE(dec, nullptr);
  ASSERT_EQ(cluster.pull_results().size(), 1u);
  EXPECT_EQ(cluster.pull_results()[0], ClaimStatus::kExpired);
  EXPECT_TRUE(dec->kv_pull_failed);
  EXPECT_EQ(dec->transferred_tokens, 0u);
  EXPECT_EQ(dec->timing.ttft(), d.config().model.idle_ttft(3000, 0));
  EXPECT_EQ(d.stats().kv_pulls_failed, 1u);
}

TEST(PrefillDecode, WrongHandoffsRecompute) {
  Pair s;
  const auto prompt = make_prompt(1000, 4);
  const Completion pre = s.run(s.p, prefill_leg(prompt, "req-w"), 0);
  ASSERT_TRUE(pre.kv_transfer_params.has_value());
  struct Case {
    const char* name;
    std::function<void(KvTransferParams&)> spoil;
    ClaimStatus want;
  };
  const std::vector<Case> cases = {
      {"unknown engine", [](KvTransferParams& k) { k.remote_engine_id = "nobody"; }, ClaimStatus::kUnknown},
      {"unknown request", [](KvTransferParams& k) { k.remote_request_id = "req-x"; }, ClaimStatus::kUnknown},
      {"other blocks", [](KvTransferParams& k) { k.remote_block_ids->back() += 1; }, ClaimStatus::kMismatch},
  };
  Nanos t = pre.timing.finished;
  for (const auto& c : cases) {
    KvTransferParams k = *pre.kv_transfer_params;
    c.spoil(k);
    const size_t before = s.cluster.pull_results().size();
    const Completion dec = s.run(s.d, decode_leg(prompt, k, 2), t);
    ASSERT_EQ(s.cluster.pull_results().size(), before + 1) << c.name;
    EXPECT_EQ(s.cluster.pull_results().back(), c.want) << c.name;
    EXPECT_TRUE(dec.kv_pull_failed) << c.name;
    s.d.evict_all(dec.timing.finished);
    t = dec.timing.finished + kNanosPerSecond;
  }
  EXPECT_EQ(s.p.gauges().held_handoffs, 1u);  // none of them claimed the real handoff
}

TEST(PrefillDecode, IncompleteParamsAreIgnoredAndRecomputed) {
  Pair s;
  KvTransferParams k;
  k.do_remote_prefill = true;
  k.remote_engine_id = "prefill-0";  // no block ids, host, port, request id
  const Completion dec = s.run(s.d, decode_leg(make_prompt(300, 5), k, 2), 0);
  EXPECT_TRUE(s.cluster.pull_results().empty());
  EXPECT_TRUE(dec.kv_pull_failed);
  EXPECT_EQ(dec.usage.completion_tokens, 2u);
}

TEST(PrefillDecode, PromptShorterThanABlockHasNoBlocksToTransfer) {
  Pair s;
  const auto prompt = make_prompt(10, 6);
  const Completion pre = s.run(s.p, prefill_leg(prompt, "req-short"), 0);
  ASSERT_TRUE(pre.kv_transfer_params.has_value());
  EXPECT_TRUE(pre.kv_transfer_params->remote_block_ids->empty());
  EXPECT_EQ(s.p.gauges().held_handoffs, 0u);
  EXPECT_EQ(s.p.gauges().used_blocks, 0u);
  const Completion dec = s.run(s.d, decode_leg(prompt, pre.kv_transfer_params, 3), pre.timing.finished);
  EXPECT_TRUE(s.cluster.pull_results().empty());
  EXPECT_EQ(dec.transferred_tokens, 0u);
  EXPECT_FALSE(dec.kv_pull_failed);
}

TEST(PrefillDecode, StreamingPrefillIsRefused) {
  Engine p(named("prefill-0", 5600));
  Request r = prefill_leg(make_prompt(100, 7), "req-s");
  r.stream = true;
  auto h = p.add_request(std::move(r), 0);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code, EngineError::kInvalidRequest);
}

TEST(PrefillDecode, DecodeLocalCacheHitsShrinkThePull) {
  Pair s;
  const auto prompt = make_prompt(2008, 8);  // 125 full blocks + an 8-token tail
  // The decode instance already holds the first 1000 tokens' blocks.
  s.run(s.d, decode_leg(std::vector<TokenId>(prompt.begin(), prompt.begin() + 1000), std::nullopt, 1), 0);
  const Completion pre = s.run(s.p, prefill_leg(prompt, "req-h"), kNanosPerSecond);
  const Completion dec = s.run(s.d, decode_leg(prompt, pre.kv_transfer_params, 2), pre.timing.finished);
  EXPECT_EQ(dec.transferred_tokens, 2000u - 1000u / 16u * 16u);
  EXPECT_EQ(dec.usage.cached_tokens, 2000u);
}

}  // namespace
}  // namespace cgn::sim
