// Fuzz target: fault specs (flag and X-Sim-Fault header forms).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/faults.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view spec(reinterpret_cast<const char*>(data), size);
  for (bool header : {true, false}) {
    auto r = cgn::sim::parse_fault_spec(spec, header);
    if (r.ok()) {
      if (r->rate < 0.0 || r->rate > 1.0 || r->stall < 0 || r->slow_start < 0 ||
          (header && r->refuse_connections)) {
        __builtin_trap();
      }
      (void)cgn::sim::fault_applies(*r, spec);
    } else if (r.error().message.empty()) {
      __builtin_trap();
    }
  }
  return 0;
}
