// Engine /metrics → NodeMetrics → NodeUpdate: per-engine mappings over a parsed Prometheus
// page, shared by the gateway (scraping bare endpoints) and the agent (scraping its engine).
// Pure functions; the HTTP fetch belongs to the caller. Thread-safe.
//
// Mappings (details and sources in docs/architecture/routing.md):
//   vLLM      vllm:num_requests_waiting / _running (summed over the `engine` label),
//             vllm:kv_cache_usage_perc or the older vllm:gpu_cache_usage_perc (averaged),
//             vllm:cache_config_info{num_gpu_blocks, block_size} (blocks summed), prefix cache
//             counters under the new and the old (gpu_prefix_cache_*) names.
//   SGLang    sglang:num_queue_reqs / num_running_reqs / token_usage; total_blocks =
//             sglang:max_total_num_tokens / page_size (page size from MapperOptions).
//   llama.cpp llamacpp:requests_deferred / requests_processing; kv_cache_usage_ratio when the
//             build still exports it; no block count (total_blocks 0).
//   TRT-LLM   /prometheus/metrics: trtllm_num_requests_waiting / _running,
//             trtllm_kv_cache_utilization, kv_cache_{reused,missed}_blocks_total (also with the
//             "trtllm:" prefix Dynamo adds). Built from documented names: no real capture exists.
// A value that is not on the page stays unset; total_blocks is 0 when not derivable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "routing/node_state.h"
#include "routing/prometheus.h"

namespace cgn::routing {

enum class EngineKind : uint8_t { kVllm, kSglang, kLlamaCpp, kTrtLlm };

std::string_view to_string(EngineKind k);
// "vllm", "sglang", "llamacpp" (also "llama.cpp", "llama-server"), "trtllm" (also "tensorrt-llm").
std::optional<EngineKind> parse_engine_kind(std::string_view s);
// The metrics path of each engine: "/metrics", or "/prometheus/metrics" for TRT-LLM.
std::string_view metrics_path(EngineKind k);

struct MapperOptions {
  // Only series whose model_name label equals this count (series without the label always
  // count). Empty = all.
  std::string model;
  // SGLang's --page-size (tokens per KV page), used to turn max_total_num_tokens into blocks.
  uint32_t sglang_page_size = 1;
};

struct NodeMetrics {
  std::optional<double> queue_depth;
  std::optional<double> running;
  std::optional<double> kv_used_ratio;
  uint64_t total_blocks = 0;       // 0 = unknown
  uint32_t block_size_tokens = 0;  // 0 = unknown
  // Counters (cumulative). Units: tokens, except TRT-LLM and early-V1 vLLM old names (blocks).
  std::optional<double> prefix_cache_hits;
  std::optional<double> prefix_cache_queries;
  std::optional<double> prompt_tokens_total;
  std::optional<double> generation_tokens_total;
};

NodeMetrics map_engine_metrics(EngineKind kind, const PromDocument& doc, const MapperOptions& options = {});

// parse_prometheus_text + map_engine_metrics.
Result<NodeMetrics, PromError> scrape_engine_metrics(EngineKind kind, std::string_view text,
                                                     const MapperOptions& options = {},
                                                     const PromLimits& limits = {});

// The node-state update a scrape produces: load, KV use and pool size (free_blocks derived
// from total and use when both are known).
NodeUpdate to_node_update(const NodeMetrics& m);

}  // namespace cgn::routing
