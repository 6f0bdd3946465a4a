// kind = "ipmi": the BMC's chassis power through `ipmitool dcmi power reading` (`path`: the
// ipmitool binary, default `ipmitool` on PATH), run once per read with the source's timeout.
// Integer watts, no energy counter (the Reader integrates power × time). A reading whose state is
// "deactivated" is not a reading.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "core/config.h"
#include "power/source.h"

namespace cgn::power {

struct DcmiReading {
  uint32_t instant_watts = 0;
  std::optional<uint32_t> average_watts;
  std::optional<uint32_t> sampling_period_s;
};

// Parses ipmitool's `dcmi power reading` output (lib/ipmi_dcmi.c's format). Bounded: 64 KiB of
// output at most. kBadData when the instantaneous reading is missing or the state is deactivated.
Result<DcmiReading, SourceError> parse_dcmi_power_reading(std::string_view text);

Result<std::unique_ptr<Source>, SourceError> make_ipmi_source(const config::PowerSourceConfig& cfg);

}  // namespace cgn::power
