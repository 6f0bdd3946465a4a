// A bounded parser for the Prometheus text exposition format (version 0.0.4, as served by
// vLLM, SGLang, llama.cpp and TensorRT-LLM), plus the OpenMetrics "# EOF" terminator.
// Pure function over bytes: the HTTP fetch belongs to the caller.
//
// Every limit is checked before the work it bounds; a violation or a malformed line is an
// error naming the line, never a crash. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cgn::routing {

struct PromLimits {
  size_t max_bytes = 8u << 20;  // whole page
  size_t max_lines = 200'000;
  size_t max_line_bytes = 64u << 10;
  size_t max_name_bytes = 256;  // metric and label names
  size_t max_labels = 64;       // per sample
  size_t max_label_value_bytes = 4096;
  size_t max_samples = 100'000;  // series
};

enum class PromType : uint8_t { kUntyped, kCounter, kGauge, kHistogram, kSummary };

struct PromLabel {
  std::string name;
  std::string value;
};

struct PromSample {
  std::string name;
  std::vector<PromLabel> labels;
  double value = 0;
  std::optional<int64_t> timestamp_ms;

  // The value of label `name`, or nullptr.
  const std::string* label(std::string_view name) const;
};

struct PromFamily {
  std::string name;
  PromType type = PromType::kUntyped;
};

struct PromDocument {
  std::vector<PromSample> samples;
  std::vector<PromFamily> families;  // from # TYPE lines, in order of appearance
};

enum class PromError : uint8_t { kTooLarge, kTooManyLines, kLineTooLong, kTooManySamples, kSyntax, kLimit };

std::string_view to_string(PromError e);

Result<PromDocument, PromError> parse_prometheus_text(std::string_view text, const PromLimits& limits = {});

}  // namespace cgn::routing
