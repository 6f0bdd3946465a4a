// The quick variant of `cgn-bench sim` (issue #8): the first 300 requests of the Mooncake
// conversation trace on 4 simulated nodes at the 0.85 level, in virtual time. Fails if the kv
// policy stops beating round_robin on prefix hit rate and TTFT p50, or if two runs with the
// same seed differ.
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
  const PolicyResult kv = run_policy(w, level, routing::PolicyKind::kKv, c);
  const PolicyResult rr = run_policy(w, level, routing::PolicyKind::kRoundRobin, c);
  EXPECT_EQ(kv.completed + kv.errors + kv.shed, 300u);
  EXPECT_EQ(rr.completed + rr.errors + rr.shed, 300u);
  EXPECT_GT(kv.hit_rate, rr.hit_rate);
  EXPECT_LT(kv.ttft_p50_s, rr.ttft_p50_s);
  EXPECT_LE(kv.errors + kv.shed, rr.errors + rr.shed);
  // Hit rates come from the engines and cannot beat the ideal node.
  EXPECT_LE(kv.hit_rate, ideal_hit_rate(w, c) + 1e-12);
}

TEST(QuickSim, SameSeedGivesIdenticalNumbers) {
  const Workload w = quick_workload();
  ASSERT_FALSE(w.requests.empty());
  ClusterConfig c;
  c.nodes = 4;
  SuiteOptions o;
  o.levels = {0.85};
  o.policies = {routing::PolicyKind::kKv, routing::PolicyKind::kRandom};
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
