// Typed power and energy samples: everything a source reads, normalised to watts and microjoules
// at the edge. Unknown is absent (std::nullopt), never 0 W.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cgn::power {

// What a watts figure stands for.
enum class Window : uint8_t {
  kInstant,  // an instantaneous reading
  kAverage,  // an average over `window` (NVML on Ampere+: 1 s; IPMI: the sampling period)
};

std::string_view to_string(Window w);

// A GPU's identity, where the source knows it (NVML, ROCm SMI, dcgm-exporter labels).
struct GpuInfo {
  std::string name;                      // "NVIDIA H100 80GB HBM3"; empty: unknown
  std::string uuid;                      // "GPU-…"; empty: unknown
  std::optional<uint64_t> memory_bytes;  // total device memory
  bool operator==(const GpuInfo&) const = default;
};

// One device's reading from one source at one time.
struct PowerSample {
  std::string source;  // the configured source name (`[[power.sources]] name`)
  std::string kind;    // the source kind: nvml, rocm_smi, dcgm_exporter, rapl, redfish, ipmi, static
  std::string device;  // GPUs: UUID (else index); RAPL: zone path; chassis: its id
  std::optional<double> watts;
  Window window = Window::kInstant;
  std::chrono::milliseconds window_length{0};  // kAverage only
  // The device's cumulative energy counter in µJ as read (since driver reload, boot, ...), where
  // the device has one. Energy totals come from deltas of this, never from power × time.
  std::optional<uint64_t> counter_uj;
  // Where the counter wraps back to 0 (RAPL max_energy_range_uj); absent: it does not wrap.
  std::optional<uint64_t> counter_range_uj;
  std::optional<double> power_limit_watts;  // the enforced limit, where known
  std::optional<GpuInfo> gpu;
  bool operator==(const PowerSample&) const = default;
};

// Unit conversions, exact where the source unit allows it.
inline constexpr double kJoulesPerKwh = 3.6e6;
inline uint64_t mj_to_uj(uint64_t mj) {
  return mj * 1000;
}
inline double uj_to_joules(uint64_t uj) {
  return static_cast<double>(uj) / 1e6;
}

// The energy between two readings of a counter: cur − prev, or across a wrap at `range`
// (range − prev + cur) when cur < prev; a counter below its last value with no range was reset and
// counts cur.
uint64_t counter_delta(uint64_t prev, uint64_t cur, std::optional<uint64_t> range);

}  // namespace cgn::power
