// Fuzz target: the powercap attribute parser (energy_uj, max_energy_range_uj).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "power/rapl_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto v = cgn::power::parse_sysfs_u64(std::string_view(reinterpret_cast<const char*>(data), size));
  (void)v;
  return 0;
}
