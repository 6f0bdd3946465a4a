// Fuzz target for the Prometheus text parser and the engine mappings over what it accepts.
// Corpus: tests/fuzz/corpus/prometheus/ (real engine pages plus malformed edge cases).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "routing/engine_metrics.h"
#include "routing/prometheus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  cgn::routing::PromLimits limits;
  limits.max_samples = 5000;  // keeps each run fast; the bound itself is what is exercised
  auto doc = cgn::routing::parse_prometheus_text(text, limits);
  if (!doc.ok()) {
    return 0;
  }
  for (auto kind : {cgn::routing::EngineKind::kVllm, cgn::routing::EngineKind::kSglang,
                    cgn::routing::EngineKind::kLlamaCpp, cgn::routing::EngineKind::kTrtLlm}) {
    const auto m = cgn::routing::map_engine_metrics(kind, *doc);
    // Whatever a page says (NaN, negative, huge), the node state stays within its invariants.
    cgn::routing::NodeState state;
    cgn::routing::apply_update(state, cgn::routing::to_node_update(m), cgn::routing::UpdateSource::kScrape,
                               0);
    if (!(state.kv_used_ratio >= 0.0 && state.kv_used_ratio <= 1.0) || !(state.queue_depth >= 0.0) ||
        !(state.running >= 0.0)) {
      __builtin_trap();
    }
  }
  return 0;
}
