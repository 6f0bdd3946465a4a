// Fuzz target: simulator fault-rules files (fault_rules.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/fault_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = cgn::sim::FaultRules::parse(text, "fuzz.rules");
  if (!r.ok()) {
    if (!r.error().message.starts_with("fuzz.rules:")) {
      __builtin_trap();  // every error names the file
    }
    return 0;
  }
  if (r->size() > cgn::sim::kMaxFaultRules) {
    __builtin_trap();
  }
  for (const auto& rule : r->rules()) {
    if (rule.pattern.empty() || rule.pattern.size() > cgn::sim::kMaxFaultPatternBytes || rule.plan.empty() ||
        rule.plan.refuse_connections) {
      __builtin_trap();
    }
    (void)r->match(rule.pattern, text);
  }
  return 0;
}
