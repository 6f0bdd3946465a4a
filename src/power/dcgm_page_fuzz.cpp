// Fuzz target: the dcgm-exporter page reader (Prometheus text into power samples).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "power/dcgm_exporter_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cgn::power::PowerSample proto;
  auto got = cgn::power::parse_dcgm_page(std::string_view(reinterpret_cast<const char*>(data), size), proto);
  if (got.ok()) {
    for (const auto& s : got.value()) {
      if (s.device.empty()) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
