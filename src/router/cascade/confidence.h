// The cascade's gate: how sure a step's model was of its answer, from the logprobs of the tokens
// it sampled, and whether that is enough to keep the answer (docs/cascade.md).
//
//   mean  the mean token logprob (the log of the geometric mean token probability): overall
//         confidence, tolerant of one unsure token;
//   min   the lowest token logprob: the answer is only as good as its least sure token.
// Either over the whole answer or over its first N tokens (first_tokens), which judges an answer
// by its opening, where a small model's uncertainty shows first. An answer with no token
// logprobs (an empty answer, an engine that sent none) is never accepted: the step escalates.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "core/config.h"

namespace cgn::router::cascade {

enum class Statistic { kMean, kMin };

struct ConfidenceRule {
  Statistic statistic = Statistic::kMean;
  double threshold = 0;       // accepted when the statistic is >= threshold (a logprob, <= 0)
  uint32_t first_tokens = 0;  // 0: every token
};

// The rule of a gated step of [router.cascade] (the config reader checked it).
ConfidenceRule rule_of(const config::CascadeStepConfig& step);

struct Verdict {
  bool accepted = false;
  std::optional<double> value;  // the statistic; nullopt when there were no tokens
  size_t tokens = 0;            // how many token logprobs it was computed over
};

// The statistic of `logprobs` (one per sampled token, in order) under `rule`, and the decision.
// A NaN logprob counts as -infinity (never confident).
Verdict judge(std::span<const double> logprobs, const ConfidenceRule& rule);

}  // namespace cgn::router::cascade
