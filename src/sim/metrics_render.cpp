#include "sim/metrics_render.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

namespace cgn::sim {

std::string go_float(double d) {
  if (std::isinf(d)) {
    return d > 0 ? "+Inf" : "-Inf";
  }
  if (std::isnan(d)) {
    return "NaN";
  }
  // Python repr: shortest round-trip digits; fixed notation when -4 <= exp < 16.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  const size_t epos = sci.find('e');
  int exp = 0;
  std::from_chars(sci.data() + epos + (sci[epos + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp);
  std::string digits;
  const bool neg = d < 0;
  for (size_t i = 0; i < epos; ++i) {
    if (sci[i] >= '0' && sci[i] <= '9') {
      digits.push_back(sci[i]);
    }
  }
  std::string s;
  if (neg) {
    s.push_back('-');
  }
  size_t dot = std::string::npos;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      const size_t int_len = static_cast<size_t>(exp) + 1;
      for (size_t i = 0; i < int_len; ++i) {
        s.push_back(i < digits.size() ? digits[i] : '0');
      }
      dot = s.size();
      s.push_back('.');
      if (digits.size() > int_len) {
        s.append(digits, int_len, std::string::npos);
      } else {
        s.push_back('0');
      }
    } else {
      s.append("0.");
      s.append(static_cast<size_t>(-exp - 1), '0');
      s.append(digits);
    }
  } else {
    s.push_back(digits[0]);
    if (digits.size() > 1) {
      s.push_back('.');
      s.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    s.append(eb);
  }
  if (d > 0 && dot != std::string::npos && dot > 6) {
    // floatToGoString: Go switches to exponents sooner than Python.
    std::string m;
    m.push_back(s[0]);
    m.push_back('.');
    m.append(s, 1, dot - 1);
    m.append(s, dot + 1, std::string::npos);
    while (!m.empty() && (m.back() == '0' || m.back() == '.')) {
      m.pop_back();
    }
    m.append("e+0");
    m.append(std::to_string(dot - 1));
    return m;
  }
  return s;
}

std::string cpp_float(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

namespace {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

class PromWriter {
 public:
  PromWriter(Labels base, bool go_style) : base_(std::move(base)), go_(go_style) {}

  void family(std::string_view name, std::string_view help, std::string_view type) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  void sample(std::string_view name, const Labels& extra, double v) {
    out_ += name;
    Labels all = base_;
    all.insert(all.end(), extra.begin(), extra.end());
    if (sorted_) {
      std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    if (!all.empty()) {
      out_ += '{';
      for (size_t i = 0; i < all.size(); ++i) {
        if (i != 0) {
          out_ += ',';
        }
        out_ += all[i].first;
        out_ += "=\"";
        escape_label(all[i].second);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += go_ ? go_float(v) : cpp_float(v);
    out_ += '\n';
  }

  void gauge(std::string_view name, std::string_view help, double v, const Labels& extra = {}) {
    family(name, help, "gauge");
    sample(name, extra, v);
  }

  // prometheus_client counter: name_total plus a name_created gauge.
  void counter(std::string_view base, std::string_view help,
               const std::vector<std::pair<Labels, double>>& series, bool created) {
    const std::string total = std::string(base) + "_total";
    family(total, help, "counter");
    for (const auto& [labels, v] : series) {
      sample(total, labels, v);
    }
    if (created) {
      const std::string c = std::string(base) + "_created";
      family(c, help, "gauge");
      for (const auto& [labels, v] : series) {
        sample(c, labels, created_);
      }
    }
  }

  void histogram(std::string_view name, std::string_view help, const Histogram& h, bool created,
                 bool sum_first = false) {
    family(name, help, "histogram");
    const std::string n(name);
    auto sum = [&] { sample(n + "_sum", {}, h.sum()); };
    if (sum_first) {
      sum();
    }
    uint64_t cum = 0;
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      cum += h.bucket(i);
      sample(n + "_bucket", {{"le", go_float(h.bounds()[i])}}, static_cast<double>(cum));
    }
    cum += h.bucket(h.bounds().size());
    sample(n + "_bucket", {{"le", "+Inf"}}, static_cast<double>(cum));
    sample(n + "_count", {}, static_cast<double>(h.count()));
    if (!sum_first) {
      sum();
    }
    if (created) {
      family(n + "_created", help, "gauge");
      sample(n + "_created", {}, created_);
    }
  }

  void set_sorted(bool s) { sorted_ = s; }
  void set_created(double c) { created_ = c; }
  std::string take() { return std::move(out_); }

 private:
  void escape_label(std::string_view v) {
    for (char c : v) {
      if (c == '\\' || c == '"') {
        out_ += '\\';
        out_ += c;
      } else if (c == '\n') {
        out_ += "\\n";
      } else {
        out_ += c;
      }
    }
  }

  Labels base_;
  bool go_;
  bool sorted_ = true;
  double created_ = 0.0;
  std::string out_;
};

double ratio(uint64_t a, uint64_t b) {
  return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
}

// One unlabelled series (beyond the writer's base labels).
std::vector<std::pair<Labels, double>> one(double v) {
  return {{{}, v}};
}

// Only with a KV offload tier (offload_tier.h): where the prompt tokens came from, the link, the puts.
void render_offload(PromWriter& w, const Engine& e) {
  const EngineStats& s = e.stats();
  w.counter("cgn_sim:kv_offload_loaded_tokens", "Prompt tokens loaded from the KV offload tier, by tier.",
            {{{{"tier", "ram"}}, static_cast<double>(s.prompt_tokens_loaded_ram)},
             {{{"tier", "ssd"}}, static_cast<double>(s.prompt_tokens_loaded_ssd)}},
            false);
  if (const std::optional<bool> up = e.config().offload->reachable()) {
    w.gauge("cgn_sim:kv_offload_up", "1 while the KV offload tier (cgn-kvcached) is connected, else 0.",
            *up ? 1.0 : 0.0);
  }
  if (const auto puts = e.config().offload->put_stats()) {
    w.gauge("cgn_sim:kv_offload_put_queue_blocks",
            "Evicted blocks waiting to be put into the KV offload tier, the one in flight included.",
            static_cast<double>(puts->waiting));
    w.counter("cgn_sim:kv_offload_put_dropped_blocks",
              "Evicted blocks dropped without a put, the put queue being full.",
              one(static_cast<double>(puts->dropped)), false);
    w.counter("cgn_sim:kv_offload_put_failed_blocks",
              "Puts the KV offload tier refused or did not answer (the block is not stored).",
              one(static_cast<double>(puts->failed)), false);
  }
  w.counter("cgn_sim:prompt_tokens_recomputed",
            "Prompt tokens prefilled here (not in HBM, not loaded from a tier, not transferred).",
            one(static_cast<double>(s.prompt_tokens_computed)), false);
}

std::string render_vllm(const Engine& e, const MetricsContext& ctx) {
  const EngineStats& s = e.stats();
  const EngineGauges g = e.gauges();
  PromWriter w({{"engine", ctx.engine_index}, {"model_name", ctx.model_name}}, true);
  w.set_created(ctx.created_unix);

  w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", g.running);
  w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", g.waiting);
  w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", g.kv_usage);
  if (ctx.deprecated_names) {
    w.gauge("vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
            g.kv_usage);
  }
  w.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
            one(static_cast<double>(s.prefix_cache_queries)), true);
  w.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
            one(static_cast<double>(s.prefix_cache_hits)), true);
  if (ctx.deprecated_names) {
    w.counter("vllm:gpu_prefix_cache_queries",
              "GPU prefix cache queries, in terms of number of queried tokens.DEPRECATED: Use "
              "vllm:prefix_cache_queries instead.",
              one(static_cast<double>(s.prefix_cache_queries)), true);
    w.counter(
        "vllm:gpu_prefix_cache_hits",
        "GPU prefix cache hits, in terms of number of cached tokens.DEPRECATED: Use vllm:prefix_cache_hits "
        "instead.",
        one(static_cast<double>(s.prefix_cache_hits)), true);
  }
  if (e.config().offload != nullptr) {
    render_offload(w, e);
  }
  w.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
            one(static_cast<double>(s.preemptions)), true);
  w.counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
            one(static_cast<double>(s.prompt_tokens)), true);
  w.counter("vllm:generation_tokens", "Number of generation tokens processed.",
            one(static_cast<double>(s.generation_tokens)), true);
  w.counter("vllm:request_success", "Count of successfully processed requests.",
            {{{{"finished_reason", "stop"}}, static_cast<double>(s.finished[0])},
             {{{"finished_reason", "length"}}, static_cast<double>(s.finished[1])},
             {{{"finished_reason", "abort"}}, static_cast<double>(s.finished[2])}},
            true);
  w.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens_hist,
              true);
  w.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
              s.generation_tokens_hist, true);
  w.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
              s.iteration_tokens, true);
  w.histogram("vllm:request_max_num_generation_tokens",
              "Histogram of maximum number of requested generation tokens.", s.max_generation_tokens_hist,
              true);
  w.histogram("vllm:request_params_n", "Histogram of the n request parameter.", s.params_n, true);
  w.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
              s.params_max_tokens, true);
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft,
              true);
  if (ctx.deprecated_names) {
    w.histogram(
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds "
        "instead.",
        s.itl, true);
  }
  w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", s.itl,
              true);
  w.histogram("vllm:request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.", s.time_per_output_token, true);
  w.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", s.e2e,
              true);
  w.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
              s.queue_time, true);
  w.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
              s.inference_time, true);
  w.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
              s.prefill_time, true);
  w.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
              s.decode_time, true);
  const NodeModel& m = e.config().model;
  // cache_config_info carries the CacheConfig fields and engine, but no model_name.
  PromWriter info({{"engine", ctx.engine_index}}, true);
  info.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", 1.0,
             {{"block_size", std::to_string(m.block_size)},
              {"cache_dtype", "auto"},
              {"calculate_kv_scales", "False"},
              {"cpu_kvcache_space_bytes", "None"},
              {"cpu_offload_gb", "0.0"},
              {"enable_prefix_caching", e.config().enable_prefix_caching ? "True" : "False"},
              {"gpu_memory_utilization", "0.9"},
              {"is_attention_free", "False"},
              {"kv_cache_memory_bytes", "None"},
              {"kv_sharing_fast_prefill", "False"},
              {"mamba_cache_dtype", "auto"},
              {"mamba_page_size_padded", "None"},
              {"mamba_ssm_cache_dtype", "auto"},
              {"num_cpu_blocks", "None"},
              {"num_gpu_blocks", std::to_string(m.num_gpu_blocks)},
              {"num_gpu_blocks_override", "None"},
              {"prefix_caching_hash_algo", "sha256"},
              {"sliding_window", "None"},
              {"swap_space", "4.0"},
              {"swap_space_bytes", "4294967296.0"}});
  return w.take() + info.take();
}

std::string render_sglang(const Engine& e, const MetricsContext& ctx) {
  const EngineStats& s = e.stats();
  const EngineGauges g = e.gauges();
  PromWriter w({{"model_name", ctx.model_name}}, true);
  auto total = [&](std::string_view name, std::string_view help, double v, const Labels& extra = {}) {
    w.family(name, help, "counter");
    w.sample(name, extra, v);
  };
  total("sglang:prompt_tokens_total", "Number of prefill tokens processed.",
        static_cast<double>(s.prompt_tokens));
  total("sglang:generation_tokens_total", "Number of generation tokens processed.",
        static_cast<double>(s.generation_tokens));
  total("sglang:cached_tokens_total", "Number of cached prompt tokens.",
        static_cast<double>(s.prompt_tokens_cached), {{"cache_source", "device"}});
  total("sglang:num_requests_total", "Number of requests processed.",
        static_cast<double>(s.finished[0] + s.finished[1] + s.finished[2]));
  w.gauge("sglang:token_usage", "The token usage", g.kv_usage);
  w.gauge("sglang:cache_hit_rate", "The cache hit rate", ratio(s.prefix_cache_hits, s.prefix_cache_queries));
  w.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              s.sglang_ttft, false, true);
  w.histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
              s.sglang_e2e, false, true);
  w.histogram("sglang:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
              s.sglang_tpot, false, true);
  w.gauge("sglang:num_running_reqs", "The number of running requests", g.running);
  w.gauge("sglang:num_used_tokens", "The number of used tokens",
          static_cast<double>(g.used_blocks) * static_cast<double>(g.block_size));
  w.gauge("sglang:gen_throughput", "The generate throughput (token/s)", s.last_step_gen_throughput);
  w.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue", g.waiting);
  w.gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool",
          static_cast<double>(g.total_blocks) * static_cast<double>(g.block_size));
  return w.take();
}

std::string render_llamacpp(const Engine& e) {
  const EngineStats& s = e.stats();
  const EngineGauges g = e.gauges();
  PromWriter w({}, false);
  auto metric = [&](std::string_view name, std::string_view help, std::string_view type, double v) {
    w.family(name, help, type);
    w.sample(name, {}, v);
  };
  const double prompt_s = static_cast<double>(s.prefill_ns) * 1e-9;
  const double gen_s = static_cast<double>(s.decode_ns) * 1e-9;
  metric("llamacpp:prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
         "counter", static_cast<double>(s.prompt_tokens_computed));
  metric("llamacpp:prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", "counter",
         static_cast<double>(s.prompt_tokens_cached));
  metric("llamacpp:prompt_seconds_total", "Total time spent processing prompts", "counter", prompt_s);
  metric("llamacpp:tokens_predicted_total", "Number of generation tokens processed", "counter",
         static_cast<double>(s.generation_tokens));
  metric("llamacpp:tokens_predicted_seconds_total", "Total time spent generating tokens", "counter", gen_s);
  metric("llamacpp:n_decode_total",
         "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
         "counter", static_cast<double>(s.steps));
  metric("llamacpp:n_tokens_max", "Largest observed sequence length (prompt + generation)", "counter",
         static_cast<double>(s.max_seq_tokens));
  metric("llamacpp:spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated",
         "counter", 0);
  metric("llamacpp:spec_decode_num_accepted_tokens_total",
         "Speculative: Total draft tokens accepted by the target model", "counter", 0);
  metric("llamacpp:spec_decode_num_drafts_total",
         "Speculative: Total speculative decoding verification steps", "counter", 0);
  metric("llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s", "gauge",
         prompt_s > 0 ? static_cast<double>(s.prompt_tokens_computed) / prompt_s : 0.0);
  metric("llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s", "gauge",
         gen_s > 0 ? static_cast<double>(s.generation_tokens) / gen_s : 0.0);
  metric("llamacpp:requests_processing", "Number of requests processing", "gauge", g.running);
  metric("llamacpp:requests_deferred", "Number of requests deferred", "gauge", g.waiting);
  metric("llamacpp:n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", "gauge",
         s.steps == 0 ? 0.0 : static_cast<double>(s.busy_seqs_sum) / static_cast<double>(s.steps));
  return w.take();
}

std::string render_trtllm(const Engine& e, const MetricsContext& ctx) {
  const EngineStats& s = e.stats();
  const EngineGauges g = e.gauges();
  PromWriter w({{"engine_type", "pytorch"}, {"model_name", ctx.model_name}}, true);
  auto counter = [&](std::string_view name, std::string_view help, double v, const Labels& extra = {}) {
    w.family(name, help, "counter");
    w.sample(name, extra, v);
  };
  w.family("trtllm_request_success_total", "Count of successfully processed requests.", "counter");
  w.sample("trtllm_request_success_total", {{"finished_reason", "stop"}}, static_cast<double>(s.finished[0]));
  w.sample("trtllm_request_success_total", {{"finished_reason", "length"}},
           static_cast<double>(s.finished[1]));
  w.sample("trtllm_request_success_total", {{"finished_reason", "abort"}},
           static_cast<double>(s.finished[2]));
  w.histogram("trtllm_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
              s.e2e, false);
  w.histogram("trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft,
              false);
  w.histogram("trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.",
              s.time_per_output_token, false);
  w.histogram("trtllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
              s.queue_time, false);
  counter("trtllm_prompt_tokens_total", "Number of prefill tokens processed.",
          static_cast<double>(s.prompt_tokens));
  counter("trtllm_generation_tokens_total", "Number of generation tokens processed.",
          static_cast<double>(s.generation_tokens));
  w.gauge("trtllm_kv_cache_hit_rate", "KV cache hit rate.",
          ratio(s.blocks_reused, s.blocks_reused + s.blocks_missed));
  w.gauge("trtllm_kv_cache_utilization", "KV cache utilization.", g.kv_usage);
  w.gauge("trtllm_num_requests_running", "Number of requests running.", g.running);
  w.gauge("trtllm_num_requests_waiting", "Number of requests waiting.", g.waiting);
  counter("trtllm_kv_cache_reused_blocks_total", "Number of reused KV cache blocks.",
          static_cast<double>(s.blocks_reused));
  counter("trtllm_kv_cache_missed_blocks_total", "Number of missed KV cache blocks.",
          static_cast<double>(s.blocks_missed));
  return w.take();
}

}  // namespace

std::string render_metrics(Flavour f, const Engine& engine, const MetricsContext& ctx) {
  switch (f) {
    case Flavour::kVllm:
      return render_vllm(engine, ctx);
    case Flavour::kSglang:
      return render_sglang(engine, ctx);
    case Flavour::kLlamacpp:
      return render_llamacpp(engine);
    case Flavour::kTrtllm:
      return render_trtllm(engine, ctx);
    case Flavour::kMlx:
      return {};
  }
  return {};
}

}  // namespace cgn::sim
