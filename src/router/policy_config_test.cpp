#include "router/policy_config.h"

#include <gtest/gtest.h>

namespace cgn::router {
namespace {

TEST(PolicyConfig, MapsMillisecondWeightsToTheCoreUnits) {
  config::RouterConfig cfg;
  cfg.policy = "least_load";
  cfg.routing.block_bytes = 256;
  cfg.routing.weights.prefill_ms_per_block = 4.0;
  cfg.routing.weights.queue_ms_per_request = 50;
  cfg.routing.weights.running_ms_per_request = 8;
  cfg.routing.weights.kv_pressure_ms = 200;
  cfg.routing.weights.kv_knee = 0.5;
  cfg.routing.weights.uncached_weight = 3;
  cfg.routing.weights.inflight_prefill_weight = 0.25;
  cfg.routing.weights.temperature = 10;
  cfg.routing.load_guard.spread_min_gap = 5;
  cfg.routing.load_guard.spread_ratio = 3;
  cfg.routing.index_ttl_s = 30;
  cfg.routing.max_staleness_ms = 2500;
  const auto p = policy_from_config(cfg).value();
  EXPECT_EQ(p.ranking->name(), "least_load");
  // 256 bytes / 4 bytes per token = 64 tokens per block in 4 ms = 16000 tokens/s.
  EXPECT_DOUBLE_EQ(p.weights.prefill_tokens_per_s, 16000.0);
  EXPECT_DOUBLE_EQ(p.weights.queue_seconds, 0.05);
  EXPECT_DOUBLE_EQ(p.weights.running_seconds, 0.008);
  EXPECT_DOUBLE_EQ(p.weights.kv_pressure_seconds, 0.2);
  EXPECT_DOUBLE_EQ(p.weights.kv_knee, 0.5);
  EXPECT_DOUBLE_EQ(p.weights.uncached_weight, 3);
  EXPECT_DOUBLE_EQ(p.weights.inflight_prefill_weight, 0.25);
  EXPECT_DOUBLE_EQ(p.temperature_s, 0.01);
  EXPECT_DOUBLE_EQ(p.guard.spread_abs, 5);
  EXPECT_DOUBLE_EQ(p.guard.spread_rel, 3);
  EXPECT_EQ(p.max_staleness, 2500 * kNanosPerMilli);
  EXPECT_EQ(index_from_config(cfg).optimistic_ttl, 30 * kNanosPerSecond);
}

TEST(PolicyConfig, AnUnknownPolicyIsAnErrorListingTheRegisteredNames) {
  config::RouterConfig cfg;
  cfg.policy = "fastest";
  auto p = policy_from_config(cfg);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message,
            "routing policy \"fastest\" is not registered; registered: kv, round_robin, random, least_load, "
            "session");
}

TEST(PolicyConfig, DescribesOnlyWhatChanged) {
  config::RouterConfig a;
  config::RouterConfig b = a;
  EXPECT_EQ(describe_policy_change(policy_from_config(a).value(), policy_from_config(b).value()), "");
  b.policy = "round_robin";
  b.routing.weights.queue_ms_per_request = 50;
  EXPECT_EQ(describe_policy_change(policy_from_config(a).value(), policy_from_config(b).value()),
            "policy kv -> round_robin, queue_seconds 0.1 -> 0.05");
}

// cgn-bench sim runs a default RoutingPolicy and IndexConfig (bench_harness/cluster_sim.h);
// cgn-router runs policy_from_config of its configuration. With no configuration the two must
// be the same policy, or the benchmark measures something the router does not ship.
TEST(PolicyConfig, DefaultRouterConfigIsTheBenchmarkedPolicy) {
  const config::RouterConfig defaults;
  const routing::RoutingPolicy router = policy_from_config(defaults).value();
  const routing::RoutingPolicy bench;
  EXPECT_EQ(describe_policy_change(bench, router), "");
  EXPECT_TRUE(router == bench);
  EXPECT_EQ(index_from_config(defaults).optimistic_ttl, routing::IndexConfig{}.optimistic_ttl);
}

}  // namespace
}  // namespace cgn::router
