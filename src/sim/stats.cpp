#include "sim/stats.h"

#include <algorithm>

namespace cgn::sim {

void Histogram::observe(double v, uint64_t n) {
  if (buckets_.empty() || n == 0) {
    return;
  }
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);  // le semantics: v <= bound
  buckets_[static_cast<size_t>(it - bounds_.begin())] += n;
  count_ += n;
  sum_ += v * static_cast<double>(n);
}

namespace buckets {
const std::array<double, 22> kVllmTtft = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::array<double, 19> kVllmItl = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::array<double, 21> kVllmRequestTime = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                                 5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::array<double, 13> kVllmIterationTokens = {1,   8,    16,   32,   64,   128,  256,
                                                     512, 1024, 2048, 4096, 8192, 16384};
const std::array<double, 5> kVllmParamsN = {1, 2, 5, 10, 20};
const std::array<double, 20> kSglangTtft = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                            0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 15.0, 20.0, 25.0, 30.0};
const std::array<double, 18> kSglangTpot = {0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
                                            0.1,   0.15, 0.2,   0.3,  0.4,   0.5,  0.75, 1.0,  2.5};
const std::array<double, 15> kSglangE2e = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,  2.5, 5.0,
                                           10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0};
}  // namespace buckets

std::vector<double> one_two_five_buckets(uint64_t max) {
  std::vector<double> out;
  for (uint64_t exp = 1;; exp *= 10) {
    for (uint64_t m : {1, 2, 5}) {
      const uint64_t v = m * exp;
      if (v > max) {
        return out;
      }
      out.push_back(static_cast<double>(v));
    }
  }
}

EngineStats::EngineStats(uint32_t max_model_len)
    : ttft(buckets::kVllmTtft),
      itl(buckets::kVllmItl),
      e2e(buckets::kVllmRequestTime),
      queue_time(buckets::kVllmRequestTime),
      inference_time(buckets::kVllmRequestTime),
      prefill_time(buckets::kVllmRequestTime),
      decode_time(buckets::kVllmRequestTime),
      time_per_output_token(buckets::kVllmItl),
      params_n(buckets::kVllmParamsN),
      iteration_tokens(buckets::kVllmIterationTokens),
      sglang_ttft(buckets::kSglangTtft),
      sglang_tpot(buckets::kSglangTpot),
      sglang_e2e(buckets::kSglangE2e),
      token_buckets_(one_two_five_buckets(max_model_len)) {
  prompt_tokens_hist = Histogram(token_buckets_);
  generation_tokens_hist = Histogram(token_buckets_);
  max_generation_tokens_hist = Histogram(token_buckets_);
  params_max_tokens = Histogram(token_buckets_);
}

}  // namespace cgn::sim
