// kind = "nvml": NVIDIA GPUs through NVML, loaded at run time (dlopen `path`, default
// libnvidia-ml.so.1, as NVIDIA's own go-nvml does) so cgn-power builds and runs without the driver.
// No NVML header is packaged: the few entry points are declared here, and the versioned `_v2` names
// that nvml.h maps the plain ones to are looked up explicitly. Devices are keyed by UUID (the index
// order is not stable across reboots). Per device: nvmlDeviceGetPowerUsage (mW; a 1 s average on
// Ampere and newer), nvmlDeviceGetTotalEnergyConsumption (mJ since driver reload: the counter),
// nvmlDeviceGetEnforcedPowerLimit (mW), name, UUID and memory (bytes). A missing optional entry point
// leaves its field absent; a missing library is kUnsupported.
#pragma once

#include <memory>

#include "core/config.h"
#include "power/source.h"

namespace cgn::power {

Result<std::unique_ptr<Source>, SourceError> make_nvml_source(const config::PowerSourceConfig& cfg);

}  // namespace cgn::power
