// Fuzz target for the Mooncake trace parser (parse_mooncake_trace): a trace is outside bytes a
// user points `cgn-bench sim --trace` at. Whatever the bytes, the parser answers a workload or an
// error naming what was wrong; it never throws, crashes or exceeds its limits, and a workload it
// accepts is self-consistent (arrivals in order, every request with a prompt and an output, the
// held-out halves partitioning it).
// Corpus: tests/fuzz/corpus/mooncake_trace/ (lines of the bundled traces plus malformed cases).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bench_harness/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  cgn::bench::TraceLimits limits;
  limits.max_bytes = 1u << 20;
  limits.max_lines = 10'000;
  limits.max_line_bytes = 64u << 10;
  limits.max_input_tokens = 1u << 16;
  limits.max_output_tokens = 1u << 16;
  auto w = cgn::bench::parse_mooncake_trace(text, "fuzz", limits);
  if (!w.ok()) {
    if (w.error().message.empty()) {
      std::abort();  // an error must say what was wrong
    }
    return 0;
  }
  cgn::Nanos last = 0;
  for (const auto& r : w->requests) {
    if (r.segments.empty() || r.output_tokens == 0 || r.arrival < last || r.session_key.empty() ||
        r.input_tokens() == 0 || r.input_tokens() > limits.max_input_tokens) {
      std::abort();
    }
    last = r.arrival;
  }
  const size_t even = cgn::bench::session_half(*w, cgn::bench::SessionHalf::kEven).requests.size();
  const size_t odd = cgn::bench::session_half(*w, cgn::bench::SessionHalf::kOdd).requests.size();
  if (even + odd != w->requests.size()) {
    std::abort();
  }
  return 0;
}
