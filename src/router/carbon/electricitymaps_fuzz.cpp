// Fuzz target: the Electricity Maps v3 latest-intensity parser (a provider's bytes). Must never
// crash; a parsed reading is a finite rate in range.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "router/carbon/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = cgn::router::carbon::parse_electricitymaps_latest(text, "DE");
  if (r.ok() && (!std::isfinite(r->gco2_per_kwh) || r->gco2_per_kwh < 0)) {
    __builtin_trap();
  }
  return 0;
}
