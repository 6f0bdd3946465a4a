#include "routing/engine_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace cgn::routing {

std::string_view to_string(EngineKind k) {
  switch (k) {
    case EngineKind::kVllm:
      return "vllm";
    case EngineKind::kSglang:
      return "sglang";
    case EngineKind::kLlamaCpp:
      return "llamacpp";
    case EngineKind::kTrtLlm:
      return "trtllm";
  }
  return "vllm";
}

std::optional<EngineKind> parse_engine_kind(std::string_view s) {
  if (s == "vllm") {
    return EngineKind::kVllm;
  }
  if (s == "sglang") {
    return EngineKind::kSglang;
  }
  if (s == "llamacpp" || s == "llama.cpp" || s == "llama-server") {
    return EngineKind::kLlamaCpp;
  }
  if (s == "trtllm" || s == "tensorrt-llm" || s == "tensorrt_llm" || s == "trtllm-serve") {
    return EngineKind::kTrtLlm;
  }
  return std::nullopt;
}

std::string_view metrics_path(EngineKind k) {
  return k == EngineKind::kTrtLlm ? "/prometheus/metrics" : "/metrics";
}

namespace {

// No KV pool has 10^15 blocks; larger values are garbage and stay "unknown" (and converting
// them to integers would overflow).
constexpr double kMaxPlausibleBlocks = 1e15;

// Sum, count and mean of the finite values of one metric over the series that pass the model
// filter (e.g. one per vLLM `engine`).
struct Agg {
  double sum = 0;
  size_t n = 0;
  std::optional<double> total() const { return n ? std::optional<double>(sum) : std::nullopt; }
  std::optional<double> mean() const {
    return n ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt;
  }
};

bool model_ok(const PromSample& s, const MapperOptions& o) {
  if (o.model.empty()) {
    return true;
  }
  const std::string* m = s.label("model_name");
  return m == nullptr || *m == o.model;
}

Agg agg(const PromDocument& doc, std::string_view name, const MapperOptions& o) {
  Agg a;
  for (const auto& s : doc.samples) {
    if (s.name == name && model_ok(s, o) && std::isfinite(s.value)) {
      a.sum += s.value;
      ++a.n;
    }
  }
  return a;
}

// The first of several names (new before old) that is present on the page.
Agg first_of(const PromDocument& doc, std::initializer_list<std::string_view> names, const MapperOptions& o) {
  for (auto n : names) {
    Agg a = agg(doc, n, o);
    if (a.n) {
      return a;
    }
  }
  return {};
}

// The load gauges every engine reports (the first present name of each list): requests waiting
// and running (summed over the page's series) and KV use (their mean).
struct LoadGauges {
  std::initializer_list<std::string_view> waiting;
  std::initializer_list<std::string_view> running;
  std::initializer_list<std::string_view> kv_used;
};

NodeMetrics load_of(const PromDocument& doc, const LoadGauges& g, const MapperOptions& o) {
  NodeMetrics m;
  m.queue_depth = first_of(doc, g.waiting, o).total();
  m.running = first_of(doc, g.running, o).total();
  m.kv_used_ratio = first_of(doc, g.kv_used, o).mean();
  return m;
}

std::optional<uint64_t> label_u64(const PromSample& s, std::string_view name) {
  const std::string* v = s.label(name);
  if (v == nullptr) {
    return std::nullopt;
  }
  // Accept "2452" and "2452.0"; "None" and anything else is unknown.
  double d = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), d);
  if (ec != std::errc() || p != v->data() + v->size() || !std::isfinite(d) || d < 0 ||
      d > kMaxPlausibleBlocks) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(d);
}

NodeMetrics map_vllm(const PromDocument& doc, const MapperOptions& o) {
  NodeMetrics m = load_of(doc,
                          {.waiting = {"vllm:num_requests_waiting"},
                           .running = {"vllm:num_requests_running"},
                           .kv_used = {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}},
                          o);
  // cache_config_info carries the pool size as labels (one series per engine); it has no
  // model_name label, so it is never filtered out by the model.
  bool all_known = true;
  bool any = false;
  uint64_t blocks = 0;
  for (const auto& s : doc.samples) {
    if (s.name != "vllm:cache_config_info") {
      continue;
    }
    any = true;
    auto nb = label_u64(s, "num_gpu_blocks");
    auto bs = label_u64(s, "block_size");
    if (!nb || *nb == 0) {
      all_known = false;
      continue;
    }
    blocks += *nb;
    if (bs && *bs > 0 && *bs < (1u << 20)) {
      m.block_size_tokens = static_cast<uint32_t>(*bs);
    }
  }
  if (any && all_known) {
    m.total_blocks = blocks;
  }
  m.prefix_cache_hits =
      first_of(doc, {"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}, o).total();
  m.prefix_cache_queries =
      first_of(doc, {"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"}, o).total();
  m.prompt_tokens_total = agg(doc, "vllm:prompt_tokens_total", o).total();
  m.generation_tokens_total = agg(doc, "vllm:generation_tokens_total", o).total();
  return m;
}

NodeMetrics map_sglang(const PromDocument& doc, const MapperOptions& o) {
  NodeMetrics m = load_of(doc,
                          {.waiting = {"sglang:num_queue_reqs"},
                           .running = {"sglang:num_running_reqs"},
                           .kv_used = {"sglang:token_usage"}},
                          o);
  const Agg tokens = agg(doc, "sglang:max_total_num_tokens", o);
  const uint32_t page = o.sglang_page_size == 0 ? 1 : o.sglang_page_size;
  // An implausible pool size (beyond any real KV pool) is treated as unknown.
  if (tokens.n && tokens.sum >= page && tokens.sum <= kMaxPlausibleBlocks) {
    m.total_blocks = static_cast<uint64_t>(tokens.sum) / page;
    m.block_size_tokens = page;
  }
  m.prefix_cache_hits = agg(doc, "sglang:cached_tokens_total", o).total();
  m.prompt_tokens_total = agg(doc, "sglang:prompt_tokens_total", o).total();
  // SGLang counts prompt tokens including the cached ones: they are the queries.
  m.prefix_cache_queries = m.prompt_tokens_total;
  m.generation_tokens_total = agg(doc, "sglang:generation_tokens_total", o).total();
  return m;
}

NodeMetrics map_llamacpp(const PromDocument& doc, const MapperOptions& o) {
  NodeMetrics m = load_of(doc,
                          {.waiting = {"llamacpp:requests_deferred"},
                           .running = {"llamacpp:requests_processing"},
                           .kv_used = {"llamacpp:kv_cache_usage_ratio"}},
                          o);
  m.prompt_tokens_total = agg(doc, "llamacpp:prompt_tokens_total", o).total();
  m.generation_tokens_total = agg(doc, "llamacpp:tokens_predicted_total", o).total();
  // Current builds: prompt_tokens_total excludes cached tokens, counted apart.
  m.prefix_cache_hits = agg(doc, "llamacpp:prompt_tokens_cached_total", o).total();
  if (m.prefix_cache_hits && m.prompt_tokens_total) {
    m.prefix_cache_queries = *m.prefix_cache_hits + *m.prompt_tokens_total;
  }
  return m;
}

NodeMetrics map_trtllm(const PromDocument& doc, const MapperOptions& o) {
  NodeMetrics m = load_of(doc,
                          {.waiting = {"trtllm_num_requests_waiting", "trtllm:num_requests_waiting"},
                           .running = {"trtllm_num_requests_running", "trtllm:num_requests_running"},
                           .kv_used = {"trtllm_kv_cache_utilization", "trtllm:kv_cache_utilization"}},
                          o);
  const Agg reused =
      first_of(doc, {"trtllm_kv_cache_reused_blocks_total", "trtllm:kv_cache_reused_blocks_total"}, o);
  const Agg missed =
      first_of(doc, {"trtllm_kv_cache_missed_blocks_total", "trtllm:kv_cache_missed_blocks_total"}, o);
  if (reused.n) {
    m.prefix_cache_hits = reused.sum;
    if (missed.n) {
      m.prefix_cache_queries = reused.sum + missed.sum;
    }
  }
  m.prompt_tokens_total =
      first_of(doc, {"trtllm_prompt_tokens_total", "trtllm:prompt_tokens_total"}, o).total();
  m.generation_tokens_total =
      first_of(doc, {"trtllm_generation_tokens_total", "trtllm:generation_tokens_total"}, o).total();
  return m;
}

}  // namespace

NodeMetrics map_engine_metrics(EngineKind kind, const PromDocument& doc, const MapperOptions& options) {
  switch (kind) {
    case EngineKind::kVllm:
      return map_vllm(doc, options);
    case EngineKind::kSglang:
      return map_sglang(doc, options);
    case EngineKind::kLlamaCpp:
      return map_llamacpp(doc, options);
    case EngineKind::kTrtLlm:
      return map_trtllm(doc, options);
  }
  return {};
}

Result<NodeMetrics, PromError> scrape_engine_metrics(EngineKind kind, std::string_view text,
                                                     const MapperOptions& options, const PromLimits& limits) {
  auto doc = parse_prometheus_text(text, limits);
  if (!doc.ok()) {
    return doc.error();
  }
  return map_engine_metrics(kind, *doc, options);
}

NodeUpdate to_node_update(const NodeMetrics& m) {
  NodeUpdate u;
  u.queue_depth = m.queue_depth;
  u.running = m.running;
  u.kv_used_ratio = m.kv_used_ratio;
  u.total_blocks = m.total_blocks;
  if (m.block_size_tokens != 0) {
    u.block_size_tokens = m.block_size_tokens;
  }
  if (m.total_blocks != 0 && m.kv_used_ratio) {
    const double used = std::clamp(*m.kv_used_ratio, 0.0, 1.0);
    u.free_blocks = static_cast<uint64_t>(std::llround(static_cast<double>(m.total_blocks) * (1.0 - used)));
  }
  return u;
}

}  // namespace cgn::routing
