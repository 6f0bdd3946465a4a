// The simulator's power readings, served as a dcgm-exporter page (docs/sim.md "Power model").
//
// PowerMeter turns the node model's cumulative energy into the two readings dcgm-exporter
// publishes for a GPU: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (counter, mJ since start) and
// DCGM_FI_DEV_POWER_USAGE (gauge, W; like NVML on Ampere and newer, an average over about the
// last second: here the energy delta since the oldest sample kept, at least 1 s old once there is
// one). render_dcgm_page() writes them, plus DCGM_FI_DEV_POWER_MGMT_LIMIT (W), in the exporter's
// text format and labels (gpu, UUID, device, modelName, Hostname).
//
// Not thread-safe: owned by the shell's worker thread like the Engine.
#pragma once

#include <deque>
#include <string>
#include <utility>

#include "core/clock.h"
#include "sim/node_model.h"

namespace cgn::sim {

struct PowerReading {
  double watts = 0;
  double energy_joules = 0;
};

class PowerMeter {
 public:
  // `window`: how far back the average power looks (at least).
  explicit PowerMeter(Nanos window = 1'000'000'000) : window_(window) {}
  // The reading at `now` (ns since the engine's start) with the engine's busy times so far.
  PowerReading sample(const NodeModel& model, Nanos now, uint64_t prefill_busy_ns, uint64_t decode_busy_ns);

 private:
  Nanos window_;
  std::deque<std::pair<Nanos, double>> samples_;  // (time, joules), oldest first
};

struct DcgmLabels {
  std::string gpu_uuid;  // "GPU-..." (gpu_uuid_for() makes a stable one)
  std::string model_name;
  std::string hostname;
};

// A stable, well-formed GPU UUID derived from `seed` (the engine id).
std::string gpu_uuid_for(std::string_view seed);

std::string render_dcgm_page(const PowerReading& r, double limit_watts, const DcgmLabels& labels);

}  // namespace cgn::sim
