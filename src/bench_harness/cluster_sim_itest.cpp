// The quick variant of `cgn-bench sim`, in virtual time: the first 300 requests of
// the Mooncake conversation trace and the small shared-prefix preset, each on 4 simulated nodes
// at the 0.85 level. Fails if the kv policy stops beating round_robin on prefix hit rate and
// TTFT, or if two runs with the same seed differ.
#include <gtest/gtest.h>

#include "bench_harness/cluster_sim.h"
#include "bench_harness/report.h"

namespace cgn::bench {
namespace {

Workload quick_workload() {
  auto w = load_mooncake_trace(trace_path("conversation"));
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  return w.ok() ? take_first(*w, 300) : Workload{};
}

TEST(QuickSim, KvBeatsRoundRobinOnHitRateAndTtft) {
  const Workload w = quick_workload();
  ASSERT_EQ(w.requests.size(), 300u);
  ClusterConfig c;
  c.nodes = 4;
  const LoadLevel level = load_level(w, c, 0.85);
  const PolicyResult kv = run_policy(w, level, routing::builtin_policy("kv"), c);
  const PolicyResult rr = run_policy(w, level, routing::builtin_policy("round_robin"), c);
  EXPECT_EQ(kv.completed + kv.errors + kv.shed, 300u);
  EXPECT_EQ(rr.completed + rr.errors + rr.shed, 300u);
  EXPECT_GT(kv.hit_rate, rr.hit_rate);
  EXPECT_LT(kv.ttft_p50_s, rr.ttft_p50_s);
  EXPECT_LE(kv.errors + kv.shed, rr.errors + rr.shed);
  // Hit rates come from the engines and cannot beat the ideal node, nor TTFT its floor.
  const IdealBound b = ideal_bound(w, c);
  EXPECT_EQ(b.hit_rate, ideal_hit_rate(w, c));
  EXPECT_LE(kv.hit_rate, b.hit_rate + 1e-12);
  EXPECT_GT(b.floor_ttft_p50_s, 0.0);
  EXPECT_LE(b.floor_ttft_p50_s, b.floor_ttft_p90_s);
  EXPECT_LE(b.floor_ttft_p50_s, kv.ttft_p50_s);
  EXPECT_LE(b.floor_ttft_p90_s, kv.ttft_p90_s);
}

// The synthetic shared-prefix shape (the "small" preset: 12 tenants x 3 users x 3 turns) on 4
// nodes at 0.85: kv must beat round_robin and random on hit rate and on TTFT p50 and p90.
TEST(QuickSim, KvBeatsRoundRobinAndRandomOnSharedPrefixes) {
  auto preset = shared_prefix_preset("small");
  ASSERT_TRUE(preset.ok());
  const Workload w = make_shared_prefix(*preset, 1);
  ClusterConfig c;
  c.nodes = 4;
  const LoadLevel level = load_level(w, c, 0.85);
  const PolicyResult kv = run_policy(w, level, routing::builtin_policy("kv"), c);
  for (auto other : {routing::builtin_policy("round_robin"), routing::builtin_policy("random")}) {
    const PolicyResult o = run_policy(w, level, other, c);
    SCOPED_TRACE(o.policy);
    EXPECT_EQ(o.completed + o.errors + o.shed, w.requests.size());
    EXPECT_GT(kv.hit_rate, o.hit_rate);
    EXPECT_LT(kv.ttft_p50_s, o.ttft_p50_s);
    EXPECT_LT(kv.ttft_p90_s, o.ttft_p90_s);
    EXPECT_LE(kv.errors + kv.shed, o.errors + o.shed);
  }
  EXPECT_EQ(kv.completed, w.requests.size());
  EXPECT_LE(kv.hit_rate, ideal_hit_rate(w, c) + 1e-12);
}

// The hit attribution (ClusterConfig::diagnose) observes and never decides: the same run with it
// gives the same numbers, and its sums are consistent.
TEST(QuickSim, DiagnosisDoesNotChangeDecisionsAndAddsUp) {
  const Workload w = take_first(quick_workload(), 200);
  ASSERT_FALSE(w.requests.empty());
  ClusterConfig c;
  c.nodes = 4;
  const LoadLevel level = load_level(w, c, 0.85);
  const PolicyResult plain = run_policy(w, level, routing::builtin_policy("kv"), c);
  c.diagnose = true;
  const PolicyResult diag = run_policy(w, level, routing::builtin_policy("kv"), c);
  EXPECT_EQ(plain.cached_tokens, diag.cached_tokens);
  EXPECT_EQ(plain.ttft_p90_s, diag.ttft_p90_s);
  EXPECT_EQ(plain.per_node_requests, diag.per_node_requests);
  const Diagnosis& d = diag.diagnosis;
  EXPECT_GE(d.requests, diag.completed);  // every dispatched request
  EXPECT_LE(d.requests, diag.completed + diag.errors);
  EXPECT_EQ(d.reported_tokens, diag.cached_tokens);
  EXPECT_LE(d.chosen_tokens, d.best_tokens);
  EXPECT_EQ(d.best_tokens - d.chosen_tokens, d.lost_guard + d.lost_stale + d.lost_blind + d.lost_score);
  EXPECT_EQ(plain.diagnosis.requests, 0u);
}

TEST(QuickSim, SameSeedGivesIdenticalNumbers) {
  const Workload w = quick_workload();
  ASSERT_FALSE(w.requests.empty());
  ClusterConfig c;
  c.nodes = 4;
  SuiteOptions o;
  o.levels = {0.85};
  o.policies = {routing::builtin_policy("kv"), routing::builtin_policy("random")};
  const auto a = to_json(run_workload(w, c, o));
  o.jobs = 2;  // parallel runs must not change anything either
  const auto b = to_json(run_workload(w, c, o));
  EXPECT_EQ(a.dump(), b.dump());
  c.seed = 2;  // and the seed does reach the random policy
  const auto d = to_json(run_workload(w, c, o));
  EXPECT_NE(a["levels"][0]["policies"][1].dump(), d["levels"][0]["policies"][1].dump());
}

}  // namespace
}  // namespace cgn::bench

namespace cgn::bench {
namespace {

// KV offload tiers in the cluster run: the small shared-prefix preset on 4 nodes with an HBM too
// small to keep the tenants' prefixes between turns (1,024 blocks per node): every node's tiers
// catch the evicted prefixes, so kv with tiers serves more prompt tokens without recomputing them
// than kv without, and two runs give the same numbers (virtual time).
TEST(QuickSim, TiersServeEvictedPrefixesDeterministically) {
  auto preset = shared_prefix_preset("small");
  ASSERT_TRUE(preset.ok());
  const Workload w = make_shared_prefix(*preset, 1);
  ClusterConfig c;
  c.nodes = 4;
  c.node_model.num_gpu_blocks = 1024;
  const LoadLevel level = load_level(w, c, 0.85);
  const PolicyResult plain = run_policy(w, level, routing::builtin_policy("kv"), c);
  c.tiers = TierConfig{1024, 4096};
  const PolicyResult tiered = run_policy(w, level, routing::builtin_policy("kv"), c);
  const PolicyResult again = run_policy(w, level, routing::builtin_policy("kv"), c);
  EXPECT_EQ(plain.loaded_ram_tokens + plain.loaded_ssd_tokens, 0u);
  EXPECT_GT(tiered.loaded_ram_tokens, 0u);
  EXPECT_GT(tiered.cached_tokens, plain.cached_tokens);
  EXPECT_LE(tiered.loaded_ram_tokens + tiered.loaded_ssd_tokens, tiered.cached_tokens);
  EXPECT_EQ(tiered.completed, plain.completed);
  EXPECT_EQ(again.cached_tokens, tiered.cached_tokens);
  EXPECT_EQ(again.loaded_ram_tokens, tiered.loaded_ram_tokens);
  EXPECT_EQ(again.loaded_ssd_tokens, tiered.loaded_ssd_tokens);
  EXPECT_EQ(again.ttft_p50_s, tiered.ttft_p50_s);
}

}  // namespace
}  // namespace cgn::bench
