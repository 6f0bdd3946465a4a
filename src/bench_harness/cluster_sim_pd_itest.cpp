// Disaggregated prefill/decode in the deterministic cluster simulator
// (cluster_sim_pd.h), in virtual time on the small shared-prefix preset over 4 simulated nodes:
// every request runs both legs and its decode node pulls the prompt from the prefill node; the
// numbers are reproducible; decode steps free of prefills give a lower ITL than aggregated
// serving under the simulator's model; and the KV transfer model is what the decode leg pays.
#include <gtest/gtest.h>

#include <numeric>

#include "bench_harness/cluster_sim_pd.h"

namespace cgn::bench {
namespace {

Workload small() {
  auto preset = shared_prefix_preset("small");
  EXPECT_TRUE(preset.ok());
  return preset.ok() ? make_shared_prefix(*preset, 1) : Workload{};
}

ClusterConfig four_nodes() {
  ClusterConfig c;
  c.nodes = 4;
  return c;
}

TEST(PdSim, EveryRequestRunsBothLegsAndItsDecodeNodePullsThePrompt) {
  const Workload w = small();
  const ClusterConfig c = four_nodes();
  const PdResult pd = run_pd(w, load_level(w, c, 0.85), 2, c);
  const uint64_t n = w.requests.size();
  EXPECT_EQ(pd.r.policy, "pd 2:2");
  EXPECT_EQ(pd.r.completed, n);
  EXPECT_EQ(pd.r.errors + pd.r.shed, 0u);
  EXPECT_EQ(pd.pulls_ok, n);
  EXPECT_EQ(pd.pulls_failed + pd.recomputes + pd.fallbacks, 0u);
  // Each request went once to a prefill node and once to a decode node.
  EXPECT_EQ(pd.r.per_node_requests[0] + pd.r.per_node_requests[1], n);
  EXPECT_EQ(pd.r.per_node_requests[2] + pd.r.per_node_requests[3], n);
  EXPECT_GT(pd.transferred_tokens, 0u);
  EXPECT_LE(pd.transferred_tokens, pd.r.prompt_tokens);
  // The prefill pool keeps the tenants' prefixes: the kv score finds them.
  EXPECT_GT(pd.r.hit_rate, 0.3);
}

TEST(PdSim, SameInputsGiveIdenticalNumbers) {
  const Workload w = small();
  const ClusterConfig c = four_nodes();
  const LoadLevel l = load_level(w, c, 0.85);
  const PdResult a = run_pd(w, l, 1, c), b = run_pd(w, l, 1, c);
  EXPECT_EQ(a.r.ttft_p90_s, b.r.ttft_p90_s);
  EXPECT_EQ(a.r.itl_p90_s, b.r.itl_p90_s);
  EXPECT_EQ(a.transferred_tokens, b.transferred_tokens);
  EXPECT_EQ(a.r.per_node_requests, b.r.per_node_requests);
}

TEST(PdSim, DecodeStepsWithoutPrefillsHaveALowerItlThanAggregatedServing) {
  const Workload w = small();
  const ClusterConfig c = four_nodes();
  const LoadLevel l = load_level(w, c, 0.85);
  const PolicyResult agg = run_policy(w, l, routing::builtin_policy("kv"), c);
  const PdResult pd = run_pd(w, l, 2, c);
  ASSERT_EQ(agg.completed, w.requests.size());
  ASSERT_EQ(pd.r.completed, w.requests.size());
  EXPECT_LT(pd.r.itl_p90_s, agg.itl_p90_s);
}

TEST(PdSim, TheDecodeLegPaysTheSimulatorsTransferTime) {
  const Workload w = small();
  ClusterConfig c = four_nodes();
  const LoadLevel l = load_level(w, c, 0.5);
  const PdResult fast = run_pd(w, l, 2, c);
  // 1 ms per token instead of 5 us: a pull of the ~1,600 tokens a request moves takes > 1 s.
  c.node_model.kv_transfer_ns_per_token = 1'000'000;
  const PdResult slow = run_pd(w, l, 2, c);
  ASSERT_EQ(slow.r.completed, w.requests.size());
  const double tokens_per_pull =
      static_cast<double>(slow.transferred_tokens) / static_cast<double>(slow.pulls_ok);
  EXPECT_GT(slow.r.ttft_p50_s - fast.r.ttft_p50_s, 0.5 * tokens_per_pull * 1e-3);
}

TEST(PdSim, AComparisonRunsEverySplitAtEveryLevelAndRendersIt) {
  const Workload w = small();
  const ClusterConfig c = four_nodes();
  const PdReport r = run_pd_comparison(w, c, {0.5, 0.85}, {1, 2}, 2);
  ASSERT_EQ(r.levels.size(), 2u);
  for (const auto& lr : r.levels) {
    EXPECT_EQ(lr.aggregated.completed, w.requests.size());
    ASSERT_EQ(lr.splits.size(), 2u);
    EXPECT_EQ(lr.splits[0].r.policy, "pd 1:3");
    EXPECT_EQ(lr.splits[1].r.policy, "pd 2:2");
  }
  const std::string md = render_pd_markdown(r);
  EXPECT_NE(md.find("| aggregated |"), std::string::npos);
  EXPECT_NE(md.find("| pd 1:3 |"), std::string::npos);
  EXPECT_NE(md.find("Throughput"), std::string::npos);
}

TEST(PdSim, ASplitThatLeavesAPoolEmptyFailsEveryRequest) {
  const Workload w = small();
  const ClusterConfig c = four_nodes();
  const PdResult pd = run_pd(w, load_level(w, c, 0.5), 4, c);
  EXPECT_EQ(pd.r.completed, 0u);
  EXPECT_EQ(pd.r.errors, w.requests.size());
}

// disagg-cgn: a decode node whose HBM evicted a tenant's prefix into its own tier loads it from
// there on the next decode leg and pulls only the rest from the prefill node.
TEST(PdSim, DecodeLegsLoadWhatTheirOwnTiersHoldAndPullLess) {
  const Workload w = small();
  ClusterConfig c = four_nodes();
  c.node_model.num_gpu_blocks = 600;  // a few requests' worth: the decode nodes evict
  const LoadLevel l = load_level(w, c, 0.5);
  const PdResult plain = run_pd(w, l, 2, c);
  c.tiers = TierConfig{20000, 0};
  const PdResult tiered = run_pd(w, l, 2, c);
  ASSERT_EQ(plain.r.completed, w.requests.size());
  ASSERT_EQ(tiered.r.completed, w.requests.size());
  EXPECT_EQ(plain.decode_loaded_tokens, 0u);
  EXPECT_GT(tiered.decode_loaded_tokens, 0u);
  EXPECT_LT(tiered.transferred_tokens, plain.transferred_tokens);
}

}  // namespace
}  // namespace cgn::bench
