#include "agent/node_agent.h"

#include <gtest/gtest.h>

#include "testing/process.h"

namespace cgn::agent {
namespace {

TEST(ApplyScrape, fills_pool_and_load_from_the_vllm_capture_and_keeps_the_epoch) {
  const std::string page = cgn::testing::read_file(cgn::testing::sample_path("vllm-v1-metrics.txt"));
  auto m = routing::scrape_engine_metrics(routing::EngineKind::kVllm, page);
  ASSERT_TRUE(m.ok()) << m.error().message;
  cluster::NodeRecord r;
  cluster::KvEpochTracker t(100);
  EXPECT_EQ(apply_scrape(r, t, *m, 1), std::nullopt);
  EXPECT_EQ(r.total_blocks, 2452u);  // num_gpu_blocks in vllm:cache_config_info
  EXPECT_EQ(r.free_blocks, 2452u);   // idle server: kv_cache_usage_perc 0
  EXPECT_EQ(r.block_size, 16u);
  EXPECT_EQ(r.queue_depth, 0.0);
  EXPECT_EQ(r.running, 0.0);
  EXPECT_EQ(r.kv_epoch, 100u);
  EXPECT_EQ(apply_scrape(r, t, *m, 2), cluster::EpochBump::kEngineRestart);
  EXPECT_EQ(r.kv_epoch, 101u);
}

TEST(ApplyScrape, llamacpp_has_no_pool_size_so_total_blocks_stays_unknown) {
  const std::string page = cgn::testing::read_file(cgn::testing::sample_path("llamacpp-metrics.txt"));
  auto m = routing::scrape_engine_metrics(routing::EngineKind::kLlamaCpp, page);
  ASSERT_TRUE(m.ok()) << m.error().message;
  cluster::NodeRecord r;
  cluster::KvEpochTracker t(1);
  (void)apply_scrape(r, t, *m, 1);
  EXPECT_EQ(r.total_blocks, 0u);
  EXPECT_FALSE(r.free_blocks.has_value());
  EXPECT_TRUE(r.running.has_value());
}

TEST(SglangPageSize, read_from_extra_args_with_the_engines_default) {
  EXPECT_EQ(sglang_page_size({}), 1u);
  EXPECT_EQ(sglang_page_size({"--page-size", "64"}), 64u);
  EXPECT_EQ(sglang_page_size({"--mem-fraction-static", "0.8", "--page-size=32"}), 32u);
  EXPECT_EQ(sglang_page_size({"--page-size", "0"}), 1u);
  EXPECT_EQ(sglang_page_size({"--page-size", "x"}), 1u);
  EXPECT_EQ(sglang_page_size({"--page-size"}), 1u);
}

TEST(ApplyScrape, sglang_pool_is_unknown_without_max_total_num_tokens_and_in_pages_with_it) {
  // The published capture predates sglang:max_total_num_tokens: the pool stays unknown.
  const std::string page = cgn::testing::read_file(cgn::testing::sample_path("sglang-metrics.txt"));
  auto old = routing::scrape_engine_metrics(routing::EngineKind::kSglang, page);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->total_blocks, 0u);
  // The same page with the gauge newer SGLang exports (value hand-written).
  const std::string newer =
      page +
      "# TYPE sglang:max_total_num_tokens gauge\n"
      "sglang:max_total_num_tokens{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 65536\n";
  routing::MapperOptions sixteen;
  sixteen.sglang_page_size = sglang_page_size({"--page-size", "16"});
  auto pages = routing::scrape_engine_metrics(routing::EngineKind::kSglang, newer, sixteen);
  ASSERT_TRUE(pages.ok()) << pages.error().message;
  EXPECT_EQ(pages->total_blocks, 65536u / 16);
}

}  // namespace
}  // namespace cgn::agent

namespace cgn::agent {
namespace {

TEST(WattLimit, the_lower_of_configured_and_enforced_and_none_is_zero) {
  EXPECT_EQ(effective_watt_limit(0, std::nullopt), 0.0);
  EXPECT_EQ(effective_watt_limit(500, std::nullopt), 500.0);
  EXPECT_EQ(effective_watt_limit(0, 700.0), 700.0);
  EXPECT_EQ(effective_watt_limit(900, 700.0), 700.0);
  EXPECT_EQ(effective_watt_limit(250, 700.0), 250.0);
  EXPECT_EQ(effective_watt_limit(250, 0.0), 250.0);  // an enforced 0 is no reading
}

TEST(WattLimit, power_figures_replace_the_records_and_unknown_stays_absent) {
  cluster::NodeRecord r;
  apply_power(r, 400, PowerFigures{310.5, 1234.5, 700.0});
  EXPECT_EQ(r.power_watts, 310.5);
  EXPECT_EQ(r.energy_joules, 1234.5);
  EXPECT_EQ(r.watt_limit, 400.0);
  apply_power(r, 400, PowerFigures{});
  EXPECT_FALSE(r.power_watts.has_value());
  EXPECT_FALSE(r.energy_joules.has_value());
  EXPECT_EQ(r.watt_limit, 400.0);
}

}  // namespace
}  // namespace cgn::agent
