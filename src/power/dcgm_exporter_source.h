// kind = "dcgm_exporter": NVIDIA dcgm-exporter's Prometheus page (default :9400/metrics), one
// device per GPU keyed by its `UUID` label (else its `gpu` index):
//   DCGM_FI_DEV_POWER_USAGE               W, NVML's power reading
//   DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION  mJ since driver reload: the energy counter
//   DCGM_FI_DEV_POWER_MGMT_LIMIT          W, the configured power limit (when exported)
//   DCGM_FI_DEV_FB_FREE/_USED/_RESERVED   MiB: the GPU's memory
// and the `modelName` label as the GPU's name.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "power/source.h"

namespace cgn::power {

// Parses a page into one sample per GPU, each a copy of `proto` (source and kind) filled in. A
// page that does not parse is kBadData; a page with no GPU series gives no samples. Bounded (the
// Prometheus parser's limits); pure.
Result<std::vector<PowerSample>, SourceError> parse_dcgm_page(std::string_view page,
                                                              const PowerSample& proto);

Result<std::unique_ptr<Source>, SourceError> make_dcgm_exporter_source(const config::PowerSourceConfig& cfg);

}  // namespace cgn::power
