// kind = "rocm_smi": AMD GPUs through the ROCm SMI library, loaded at run time (dlopen `path`,
// default librocm_smi64.so, then /opt/rocm/lib/librocm_smi64.so); our own declarations of the few
// entry points (rocm_smi.h). Per device: rsmi_dev_power_get (µW; current socket power, else the
// average; older libraries: rsmi_dev_power_ave_get), the energy counter rsmi_dev_energy_count_get
// (ticks × counter_resolution = µJ), rsmi_dev_power_cap_get (µW), name and VRAM total (bytes).
// Devices are keyed by rsmi_dev_unique_id_get (hex) where the library has it, else "card<N>".
#pragma once

#include <memory>

#include "core/config.h"
#include "power/source.h"

namespace cgn::power {

Result<std::unique_ptr<Source>, SourceError> make_rocm_smi_source(const config::PowerSourceConfig& cfg);

}  // namespace cgn::power
