// What an engine has served, kept as plain counters and histograms (the
// engine's "probe"); the flavour renderers turn it into /metrics text.
//
// Thread safety: none; owned by one Engine.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace cgn::sim {

// A cumulative histogram over fixed upper bounds (+Inf is implicit).
class Histogram {
 public:
  Histogram() = default;
  explicit Histogram(std::span<const double> bounds) : bounds_(bounds), buckets_(bounds.size() + 1, 0) {}

  void observe(double v, uint64_t n = 1);
  std::span<const double> bounds() const { return bounds_; }
  // Non-cumulative count of bucket i (i == bounds().size() is the +Inf bucket).
  uint64_t bucket(size_t i) const { return buckets_[i]; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::span<const double> bounds_;
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  double sum_ = 0.0;
};

// Bucket lists as the engines declare them (checked against the captures).
namespace buckets {
// vLLM vllm/v1/metrics/loggers.py (testdata/samples/vllm-v1-metrics.txt).
extern const std::array<double, 22> kVllmTtft;
extern const std::array<double, 19> kVllmItl;          // also time_per_output_token
extern const std::array<double, 21> kVllmRequestTime;  // e2e, queue, inference, prefill, decode
extern const std::array<double, 13> kVllmIterationTokens;
extern const std::array<double, 5> kVllmParamsN;
// SGLang python/sglang/srt/metrics/collector.py (testdata/samples/sglang-metrics.txt).
extern const std::array<double, 20> kSglangTtft;
extern const std::array<double, 18> kSglangTpot;
extern const std::array<double, 15> kSglangE2e;
}  // namespace buckets

// The 1-2-5 token-count buckets vLLM builds up to max_model_len
// (build_1_2_5_buckets): 1, 2, 5, 10, 20, 50, ... <= max.
std::vector<double> one_two_five_buckets(uint64_t max);

enum class Finished : uint8_t { kStop = 0, kLength = 1, kAbort = 2, kError = 3 };
inline constexpr size_t kNumFinished = 4;

struct EngineStats {
  explicit EngineStats(uint32_t max_model_len);

  // Counters.
  uint64_t prompt_tokens = 0;              // full prompt length of every request that reached its first token
  uint64_t prompt_tokens_computed = 0;     // of which prefilled here (not cached, not transferred)
  uint64_t prompt_tokens_cached = 0;       // of which found in the local prefix cache
  uint64_t prompt_tokens_transferred = 0;  // of which pulled from a prefill instance (P/D)
  uint64_t prompt_tokens_loaded_ram = 0;   // of the cached ones: loaded from the offload RAM tier
  uint64_t prompt_tokens_loaded_ssd = 0;   // of the cached ones: loaded from the offload SSD tier
  uint64_t generation_tokens = 0;
  std::array<uint64_t, kNumFinished> finished{};  // by reason
  uint64_t requests_received = 0;
  uint64_t preemptions = 0;
  uint64_t prefix_cache_queries = 0;      // tokens
  uint64_t prefix_cache_hits = 0;         // tokens
  uint64_t steps = 0;                     // scheduler iterations (llama.cpp n_decode)
  uint64_t busy_seqs_sum = 0;             // sum over steps of sequences in the step
  uint64_t max_seq_tokens = 0;            // largest prompt + generation seen
  uint64_t prefill_ns = 0;                // time spent in steps that prefilled, weighted by token share
  uint64_t decode_ns = 0;                 // time spent decoding, weighted by token share
  uint64_t kv_pulls_ok = 0;               // P/D: decode-side pulls that succeeded
  uint64_t kv_pulls_failed = 0;           // P/D: handoffs that failed and were recomputed
  uint64_t kv_handoffs_expired = 0;       // P/D: prefill-side holds freed by timeout
  uint64_t kv_handoffs_claimed = 0;       // P/D: prefill-side holds claimed by a decode instance
  uint64_t blocks_reused = 0;             // full prompt blocks found cached (TRT-LLM reused blocks)
  uint64_t blocks_missed = 0;             // full prompt blocks not cached
  double last_step_gen_throughput = 0.0;  // decode tokens / second of the last step

  // Histograms (seconds unless named tokens).
  Histogram ttft;
  Histogram itl;  // one observation per generated token after the first
  Histogram e2e;
  Histogram queue_time;
  Histogram inference_time;
  Histogram prefill_time;
  Histogram decode_time;
  Histogram time_per_output_token;  // per request: decode_time / (generated - 1)
  Histogram prompt_tokens_hist;
  Histogram generation_tokens_hist;
  Histogram max_generation_tokens_hist;
  Histogram params_max_tokens;
  Histogram params_n;
  Histogram iteration_tokens;
  // SGLang's own bucket lists for the same observations.
  Histogram sglang_ttft;
  Histogram sglang_tpot;
  Histogram sglang_e2e;

 private:
  std::vector<double> token_buckets_;
};

}  // namespace cgn::sim
