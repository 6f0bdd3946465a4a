// The engine model's KV offload path against the cluster simulator's real-store tier: blocks
// the HBM evicts are put into the tier, a later miss loads them at the modelled cost instead of
// recomputing them, SSD costs more than RAM, and a lease keeps a looked-up run resident.
#include "bench_harness/cluster_sim_tiers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <optional>

#include "sim/engine.h"
#include "sim/metrics_render.h"

namespace cgn::bench {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kBs = 16;

sim::NodeModel tiny_model() {
  sim::NodeModel m = sim::default_node_model();
  m.block_size = kBs;
  m.num_gpu_blocks = 7;  // 112 tokens of HBM: a second long prompt evicts the first
  m.max_model_len = 112;
  return m;
}

kvcache::BlockNamespace test_ns() {
  kvcache::BlockNamespace ns;
  ns.model = "test-model";
  ns.dtype = "bf16";
  ns.block_tokens = kBs;
  return ns;
}

std::vector<sim::TokenId> prompt(sim::TokenId first, size_t n) {
  std::vector<sim::TokenId> p(n);
  std::iota(p.begin(), p.end(), first);
  return p;
}

// Runs one request alone to completion in virtual time; returns its completion.
sim::Completion run_one(sim::Engine& e, std::vector<sim::TokenId> tokens, Nanos& now) {
  sim::Request r;
  r.prompt = std::move(tokens);
  r.max_tokens = 2;
  r.ignore_eos = true;
  auto h = e.add_request(std::move(r), now);
  EXPECT_TRUE(h.ok());
  std::vector<sim::Event> evs;
  for (int guard = 0; guard < 1000; ++guard) {
    const Nanos t = e.next_event_time();
    if (t == sim::kNever) {
      break;
    }
    now = std::max(now, t);
    e.advance_to(now);
    e.take_events(evs);
    for (auto& ev : evs) {
      if (ev.kind == sim::EventKind::kFinished && ev.handle == *h) {
        return *ev.completion;
      }
    }
    evs.clear();
  }
  ADD_FAILURE() << "request did not finish";
  return {};
}

struct Fixture {
  ManualClock clock{0};
  std::unique_ptr<StoreTier> tier;
  std::unique_ptr<sim::Engine> engine;
  Nanos now = 0;

  explicit Fixture(TierConfig tc) {
    sim::EngineConfig ec;
    ec.model = tiny_model();
    if (tc.enabled()) {
      auto t = StoreTier::open(tc, test_ns(), clock);
      EXPECT_TRUE(t.ok()) << t.error().message;
      tier = std::move(*t);
      ec.offload = tier.get();
    }
    engine = std::make_unique<sim::Engine>(std::move(ec));
  }
  // A (64 tokens), then B (100 other tokens, evicting A from HBM), then A again.
  sim::Completion evict_and_return() {
    run_one(*engine, prompt(1, 64), now);
    run_one(*engine, prompt(1000, 100), now);
    EXPECT_EQ(engine->cached_prefix_blocks(prompt(1, 64)), 0u) << "A must have left HBM";
    return run_one(*engine, prompt(1, 64), now);
  }
};

TEST(OffloadTier, EvictedBlocksLoadFromRamAtTheModelledCost) {
  Fixture f(TierConfig{64, 0});
  const sim::Completion c = f.evict_and_return();
  const sim::NodeModel m = tiny_model();
  EXPECT_EQ(c.usage.loaded_ram_tokens, 48u);  // 3 full blocks; the last token is always computed
  EXPECT_EQ(c.usage.loaded_ssd_tokens, 0u);
  EXPECT_EQ(c.usage.cached_tokens, 48u);
  EXPECT_EQ(c.timing.ttft(), m.idle_ttft(64, 48) + m.tier_load_time(48, 0));
  EXPECT_EQ(f.engine->stats().prompt_tokens_loaded_ram, 48u);
  const std::string text = sim::render_metrics(sim::Flavour::kVllm, *f.engine, {});
  EXPECT_THAT(text, HasSubstr("model_name=\"\",tier=\"ram\"} 48.0"));
  EXPECT_THAT(text, HasSubstr("cgn_sim:prompt_tokens_recomputed_total"));
}

TEST(OffloadTier, WithoutTierTheMissRecomputes) {
  Fixture f(TierConfig{});
  const sim::Completion c = f.evict_and_return();
  EXPECT_EQ(c.usage.cached_tokens, 0u);
  EXPECT_EQ(c.usage.loaded_ram_tokens, 0u);
  EXPECT_EQ(c.timing.ttft(), tiny_model().idle_ttft(64, 0));
  EXPECT_THAT(sim::render_metrics(sim::Flavour::kVllm, *f.engine, {}),
              ::testing::Not(HasSubstr("cgn_sim:kv_offload_loaded_tokens")));
}

TEST(OffloadTier, TierMissRecomputes) {
  Fixture f(TierConfig{64, 0});
  run_one(*f.engine, prompt(1000, 100), f.now);
  const sim::Completion c = run_one(*f.engine, prompt(1, 64), f.now);  // never seen: nothing to load
  EXPECT_EQ(c.usage.cached_tokens, 0u);
  EXPECT_EQ(c.timing.ttft(), tiny_model().idle_ttft(64, 0));
  EXPECT_EQ(f.engine->stats().prompt_tokens_computed, 164u);
}

TEST(OffloadTier, SsdCostsMoreThanRam) {
  Fixture ram(TierConfig{64, 0});
  Fixture ssd(TierConfig{1, 64});  // a one-block RAM tier: the run is found on the SSD stand-in
  const sim::Completion cr = ram.evict_and_return();
  const sim::Completion cs = ssd.evict_and_return();
  // The one-block RAM tier keeps the last block put: A's head (a chain is freed tail first).
  EXPECT_EQ(cs.usage.loaded_ram_tokens, 16u);
  EXPECT_EQ(cs.usage.loaded_ssd_tokens, 32u);
  EXPECT_EQ(cs.usage.cached_tokens, 48u);
  EXPECT_GT(cs.timing.ttft(), cr.timing.ttft());
  const sim::NodeModel m = tiny_model();
  EXPECT_EQ(cs.timing.ttft(), m.idle_ttft(64, 48) + m.tier_load_time(16, 32));
  EXPECT_LT(cs.timing.ttft(), m.idle_ttft(64, 0));  // still cheaper than recomputing
}

// A decode leg (the prefill node's kv_transfer_params) on a node whose tier holds the prompt's
// head loads that head from its tier and pulls only the rest from the prefill node.
TEST(OffloadTier, DecodeLegLoadsItsTiersRunAndPullsOnlyTheRest) {
  Fixture f(TierConfig{64, 0});
  run_one(*f.engine, prompt(1, 64), f.now);
  run_one(*f.engine, prompt(1000, 100), f.now);  // A leaves HBM for the tier
  sim::Request r;
  r.prompt = prompt(1, 64);
  r.max_tokens = 2;
  r.ignore_eos = true;
  r.kv_transfer = sim::KvTransferParams{};
  r.kv_transfer->do_remote_prefill = true;
  r.kv_transfer->remote_block_ids = std::vector<int64_t>{1, 2, 3, 4};
  r.kv_transfer->remote_engine_id = "sim-node-0";
  r.kv_transfer->remote_request_id = "req-1";
  r.kv_transfer->remote_host = "127.0.0.1";
  r.kv_transfer->remote_port = 5600;
  auto h = f.engine->add_request(std::move(r), f.now);
  ASSERT_TRUE(h.ok());
  std::optional<sim::Completion> done;
  std::optional<sim::KvPull> pull;
  std::vector<sim::Event> evs;
  for (int guard = 0; guard < 1000 && !done; ++guard) {
    const Nanos t = f.engine->next_event_time();
    if (t == sim::kNever) {
      break;
    }
    f.now = std::max(f.now, t);
    f.engine->advance_to(f.now);
    evs.clear();
    f.engine->take_events(evs);
    for (auto& ev : evs) {
      if (ev.kind == sim::EventKind::kKvPull) {
        pull = *ev.pull;
        f.engine->complete_kv_pull(ev.handle, sim::ClaimStatus::kOk, f.now);
      } else if (ev.kind == sim::EventKind::kFinished && ev.handle == *h) {
        done = *ev.completion;
      }
    }
  }
  ASSERT_TRUE(pull.has_value()) << "the decode leg must still pull the prompt's tail";
  ASSERT_TRUE(done.has_value()) << "the decode leg did not finish";
  EXPECT_EQ(pull->tokens, 16u);  // 3 blocks from the tier, the fourth from the prefill node
  EXPECT_EQ(done->usage.loaded_ram_tokens, 48u);
  EXPECT_EQ(done->transferred_tokens, 15u);  // the prompt's last token is always computed
  EXPECT_EQ(done->usage.cached_tokens, 63u);
  EXPECT_FALSE(done->kv_pull_failed);
}

TEST(OffloadTier, LeaseKeepsTheRun) {
  ManualClock clock(0);
  auto t = StoreTier::open(TierConfig{4, 0}, test_ns(), clock);
  ASSERT_TRUE(t.ok()) << t.error().message;
  StoreTier& tier = **t;
  const std::vector<sim::BlockHash> first = {11, 12, 13, 14};
  const std::vector<sim::BlockHash> second = {21, 22, 23, 24};
  tier.put(first, 1);
  std::vector<sim::OffloadTierKind> run;
  tier.lookup(first, 5 * kNanosPerSecond, run);
  ASSERT_EQ(run.size(), 4u);
  tier.put(second, 1);  // the full tier cannot evict the leased run
  run.clear();
  tier.resident(first, run);
  EXPECT_EQ(run.size(), 4u);
  clock.set(6 * kNanosPerSecond);  // lease over: the next puts evict the LRU run
  tier.put(second, 1);
  run.clear();
  tier.resident(first, run);
  EXPECT_EQ(run.size(), 0u);
  run.clear();
  tier.resident(second, run);
  EXPECT_EQ(run.size(), 4u);
}

}  // namespace
}  // namespace cgn::bench
