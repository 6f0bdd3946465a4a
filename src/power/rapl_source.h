// kind = "rapl": CPU package and DRAM energy through the Linux powercap sysfs (`path`, default
// /sys/class/powercap). Reads the top-level zones (`intel-rapl:N`, which AMD Zen also uses) and
// their `dram` subzones; core/uncore subzones are inside their package and would count twice.
// Per zone: energy_uj (µJ, the counter) wrapping at max_energy_range_uj; watts are the counter's
// delta over the time between two reads on `clock` (none at the first read). EACCES on energy_uj (root-only
// since the PLATYPUS fixes) makes the source unsupported, named once in the log by the Reader.
#pragma once

#include <memory>
#include <string>

#include "core/clock.h"
#include "core/config.h"
#include "power/source.h"

namespace cgn::power {

Result<std::unique_ptr<Source>, SourceError> make_rapl_source(const config::PowerSourceConfig& cfg,
                                                              const Clock& clock = SteadyClock::instance());

// Parses a sysfs integer attribute ("123456\n"); nullopt unless it is one decimal uint64.
std::optional<uint64_t> parse_sysfs_u64(std::string_view text);

}  // namespace cgn::power
