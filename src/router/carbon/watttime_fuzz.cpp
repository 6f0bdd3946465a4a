// Fuzz target: the WattTime v3 login and forecast parsers (a provider's bytes). Must never crash;
// a parsed forecast is a finite rate in range, a parsed token is not empty.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "router/carbon/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = cgn::router::carbon::parse_watttime_forecast(text);
  if (r.ok() && (!std::isfinite(r->gco2_per_kwh) || r->gco2_per_kwh < 0)) {
    __builtin_trap();
  }
  auto t = cgn::router::carbon::parse_watttime_login(text);
  if (t.ok() && t->empty()) {
    __builtin_trap();
  }
  return 0;
}
