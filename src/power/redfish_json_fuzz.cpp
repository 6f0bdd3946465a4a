// Fuzz target: the Redfish Power and EnvironmentMetrics readers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "power/redfish_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  cgn::power::PowerSample proto;
  (void)cgn::power::parse_redfish_power(text, proto).ok();
  (void)cgn::power::parse_redfish_environment(text, proto).ok();
  return 0;
}
