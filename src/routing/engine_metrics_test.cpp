#include "routing/engine_metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "testing/process.h"

namespace cgn::routing {
namespace {

std::string corpus(const std::string& name) {
  return cgn::testing::read_file(cgn::testing::source_path("tests/fuzz/corpus/prometheus/" + name));
}

NodeMetrics scrape(EngineKind kind, const std::string& file, const MapperOptions& o = {}) {
  auto m = scrape_engine_metrics(kind, corpus(file), o);
  EXPECT_TRUE(m.ok()) << file << ": " << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : NodeMetrics{};
}

// Recorded pages (tests/fuzz/corpus/prometheus/, copied byte for byte from
// testdata/samples/); the expected numbers are read off those pages.
TEST(EngineMetrics, VllmV1IdleServer) {
  const auto m = scrape(EngineKind::kVllm, "vllm-v1-metrics.txt");
  ASSERT_TRUE(m.queue_depth && m.running && m.kv_used_ratio);
  EXPECT_EQ(*m.queue_depth, 0.0);
  EXPECT_EQ(*m.running, 0.0);
  EXPECT_EQ(*m.kv_used_ratio, 0.0);
  EXPECT_EQ(m.total_blocks, 2452u);  // cache_config_info num_gpu_blocks
  EXPECT_EQ(m.block_size_tokens, 16u);
  ASSERT_TRUE(m.prefix_cache_hits && m.prefix_cache_queries);
  EXPECT_EQ(*m.prefix_cache_queries, 0.0);
  ASSERT_TRUE(m.prompt_tokens_total);
}

TEST(EngineMetrics, VllmV0OldNames) {
  const auto m = scrape(EngineKind::kVllm, "vllm-v0-metrics-gpu-cache-usage.txt");
  ASSERT_TRUE(m.kv_used_ratio.has_value());  // from vllm:gpu_cache_usage_perc
  EXPECT_EQ(*m.kv_used_ratio, 0.0);
  EXPECT_EQ(m.total_blocks, 7281u);
  EXPECT_EQ(*m.prompt_tokens_total, 5.0);
  EXPECT_EQ(*m.generation_tokens_total, 7.0);
  EXPECT_FALSE(m.prefix_cache_hits.has_value());  // not on the page: stays unset
}

TEST(EngineMetrics, VllmOldKvNameIsUsedOnlyWithoutTheNewOne) {
  const std::string both =
      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.9\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.3\n";
  auto m = scrape_engine_metrics(EngineKind::kVllm, both);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(*m->kv_used_ratio, 0.3);
  auto old = scrape_engine_metrics(EngineKind::kVllm,
                                   "vllm:gpu_prefix_cache_hits_total{model_name=\"m\"} 4\n"
                                   "vllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 9\n");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*old->prefix_cache_hits, 4.0);
  EXPECT_EQ(*old->prefix_cache_queries, 9.0);
}

TEST(EngineMetrics, VllmSumsAndAveragesAcrossEngines) {
  const auto m = scrape(EngineKind::kVllm, "vllm-two-engines.txt");
  EXPECT_EQ(*m.running, 10.0);
  EXPECT_EQ(*m.queue_depth, 3.0);
  EXPECT_DOUBLE_EQ(*m.kv_used_ratio, 0.4);
  EXPECT_EQ(m.total_blocks, 2000u);
  EXPECT_EQ(*m.prefix_cache_hits, 120.0);
  EXPECT_EQ(*m.prefix_cache_queries, 400.0);
}

TEST(EngineMetrics, ModelFilterSkipsOtherModels) {
  MapperOptions o;
  o.model = "another-model";
  const auto m = scrape(EngineKind::kVllm, "vllm-two-engines.txt", o);
  EXPECT_FALSE(m.running.has_value());
  EXPECT_EQ(m.total_blocks, 2000u);  // cache_config_info has no model label
}

TEST(EngineMetrics, VllmUnknownBlocksStayZero) {
  auto m = scrape_engine_metrics(EngineKind::kVllm,
                                 "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"None\"} 1.0\n");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->total_blocks, 0u);
}

TEST(EngineMetrics, SglangDocsPage) {
  const auto m = scrape(EngineKind::kSglang, "sglang-metrics.txt");
  EXPECT_EQ(*m.running, 162.0);
  EXPECT_EQ(*m.queue_depth, 2826.0);
  EXPECT_DOUBLE_EQ(*m.kv_used_ratio, 0.28);
  EXPECT_EQ(m.total_blocks, 0u);  // no max_total_num_tokens on this page: never invented
  EXPECT_DOUBLE_EQ(*m.prompt_tokens_total, 8.128902e6);
  EXPECT_DOUBLE_EQ(*m.generation_tokens_total, 7.557572e6);
}

TEST(EngineMetrics, SglangBlocksFromMaxTotalTokensAndPageSize) {
  MapperOptions o;
  o.sglang_page_size = 64;
  auto m =
      scrape_engine_metrics(EngineKind::kSglang, "sglang:max_total_num_tokens{model_name=\"m\"} 640000\n", o);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->total_blocks, 10000u);
  EXPECT_EQ(m->block_size_tokens, 64u);
}

TEST(EngineMetrics, LlamaCppCurrentBuild) {
  const auto m = scrape(EngineKind::kLlamaCpp, "llamacpp-metrics.txt");
  EXPECT_EQ(*m.running, 0.0);
  EXPECT_EQ(*m.queue_depth, 0.0);
  EXPECT_FALSE(m.kv_used_ratio.has_value());  // removed upstream
  EXPECT_EQ(m.total_blocks, 0u);
  EXPECT_DOUBLE_EQ(*m.prefix_cache_hits, 7.77887e6);
  EXPECT_DOUBLE_EQ(*m.prompt_tokens_total, 191651.0);
  EXPECT_DOUBLE_EQ(*m.prefix_cache_queries, 7.77887e6 + 191651.0);
  EXPECT_DOUBLE_EQ(*m.generation_tokens_total, 275273.0);
}

TEST(EngineMetrics, LlamaCppForkWithKvUsage) {
  const auto m = scrape(EngineKind::kLlamaCpp, "llamacpp-metrics-ik_llama-fork.txt");
  EXPECT_DOUBLE_EQ(*m.kv_used_ratio, 0.491063);
  EXPECT_DOUBLE_EQ(*m.prompt_tokens_total, 6886.0);
  EXPECT_FALSE(m.prefix_cache_hits.has_value());
}

// No real TRT-LLM capture exists; this page is written from the documented names.
TEST(EngineMetrics, TrtLlmDocumentedNames) {
  const auto m = scrape(EngineKind::kTrtLlm, "trtllm-documented-names.txt");
  EXPECT_EQ(*m.running, 3.0);
  EXPECT_EQ(*m.queue_depth, 5.0);
  EXPECT_DOUBLE_EQ(*m.kv_used_ratio, 0.42);
  EXPECT_EQ(*m.prefix_cache_hits, 120.0);
  EXPECT_EQ(*m.prefix_cache_queries, 200.0);
  EXPECT_EQ(m.total_blocks, 0u);
  auto dynamo =
      scrape_engine_metrics(EngineKind::kTrtLlm, "trtllm:num_requests_running{model_name=\"m\"} 2\n");
  ASSERT_TRUE(dynamo.ok());
  EXPECT_EQ(*dynamo->running, 2.0);
  EXPECT_EQ(metrics_path(EngineKind::kTrtLlm), "/prometheus/metrics");
  EXPECT_EQ(metrics_path(EngineKind::kVllm), "/metrics");
}

TEST(EngineMetrics, EngineKindNames) {
  EXPECT_EQ(parse_engine_kind("llama.cpp"), EngineKind::kLlamaCpp);
  EXPECT_EQ(parse_engine_kind("tensorrt-llm"), EngineKind::kTrtLlm);
  EXPECT_FALSE(parse_engine_kind("mlx").has_value());
  for (auto k : {EngineKind::kVllm, EngineKind::kSglang, EngineKind::kLlamaCpp, EngineKind::kTrtLlm}) {
    EXPECT_EQ(parse_engine_kind(to_string(k)), k);
  }
}

TEST(EngineMetrics, NodeUpdateCarriesLoadAndDerivedFreeBlocks) {
  const auto m = scrape(EngineKind::kVllm, "vllm-two-engines.txt");
  const NodeUpdate u = to_node_update(m);
  EXPECT_EQ(*u.running, 10.0);
  EXPECT_EQ(*u.total_blocks, 2000u);
  EXPECT_EQ(*u.free_blocks, 1200u);
  EXPECT_EQ(*u.block_size_tokens, 16u);
  const NodeUpdate none = to_node_update(scrape(EngineKind::kLlamaCpp, "llamacpp-metrics.txt"));
  EXPECT_EQ(*none.total_blocks, 0u);
  EXPECT_FALSE(none.free_blocks.has_value());
  EXPECT_FALSE(none.kv_used_ratio.has_value());
}

TEST(EngineMetrics, ParseErrorsPropagate) {
  auto m = scrape_engine_metrics(EngineKind::kVllm, "vllm:num_requests_running{ 1\n");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, PromError::kSyntax);
}

}  // namespace
}  // namespace cgn::routing
