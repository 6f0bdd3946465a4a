#include "router/cascade/confidence.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cgn::router::cascade {

ConfidenceRule rule_of(const config::CascadeStepConfig& step) {
  ConfidenceRule r;
  r.statistic = step.statistic == "min" ? Statistic::kMin : Statistic::kMean;
  r.threshold = step.threshold.value_or(0.0);
  r.first_tokens = step.first_tokens.value_or(0);
  return r;
}

Verdict judge(std::span<const double> logprobs, const ConfidenceRule& rule) {
  Verdict v;
  const size_t n =
      rule.first_tokens == 0 ? logprobs.size() : std::min<size_t>(logprobs.size(), rule.first_tokens);
  if (n == 0) {
    return v;
  }
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  double sum = 0;
  double low = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const double lp = std::isnan(logprobs[i]) ? kNegInf : logprobs[i];
    sum += lp;
    low = std::min(low, lp);
  }
  v.tokens = n;
  v.value = rule.statistic == Statistic::kMin ? low : sum / static_cast<double>(n);
  v.accepted = *v.value >= rule.threshold;
  return v;
}

}  // namespace cgn::router::cascade
