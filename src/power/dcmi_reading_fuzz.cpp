// Fuzz target: the `ipmitool dcmi power reading` output parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "power/ipmi_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto got =
      cgn::power::parse_dcmi_power_reading(std::string_view(reinterpret_cast<const char*>(data), size));
  (void)got.ok();
  return 0;
}
