#include "sim/power_page.h"

#include <cmath>
#include <cstdio>

#include "core/metrics.h"
#include "sim/metrics_render.h"

namespace cgn::sim {

PowerReading PowerMeter::sample(const NodeModel& model, Nanos now, uint64_t prefill_busy_ns,
                                uint64_t decode_busy_ns) {
  PowerReading r;
  r.energy_joules = model.energy_joules(now, prefill_busy_ns, decode_busy_ns);
  if (!samples_.empty() && now < samples_.back().first) {
    samples_.clear();  // time went backwards (not with a steady clock): start over
  }
  samples_.emplace_back(now, r.energy_joules);
  // Drop samples while the next one is still at least a window old.
  while (samples_.size() > 2 && samples_[1].first <= now - window_) {
    samples_.pop_front();
  }
  const auto& [t0, e0] = samples_.front();
  if (now > t0) {
    r.watts = (r.energy_joules - e0) / (static_cast<double>(now - t0) * 1e-9);
  } else {
    r.watts = model.idle_watts;  // the first reading: no window yet, the engine has not stepped
  }
  return r;
}

std::string gpu_uuid_for(std::string_view seed) {
  uint64_t h1 = 1469598103934665603ULL;  // FNV-1a, twice with different offsets
  uint64_t h2 = 1099511628211ULL * 31;
  for (unsigned char c : seed) {
    h1 = (h1 ^ c) * 1099511628211ULL;
    h2 = (h2 ^ c) * 1099511628211ULL + 7;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(h1 >> 32),
                static_cast<unsigned>((h1 >> 16) & 0xffff), static_cast<unsigned>(h1 & 0xffff),
                static_cast<unsigned>(h2 >> 48), static_cast<unsigned long long>(h2 & 0xffffffffffffULL));
  return buf;
}

std::string render_dcgm_page(const PowerReading& r, double limit_watts, const DcgmLabels& labels) {
  const std::string lbl = "{gpu=\"0\",UUID=\"" + metrics::escape_label_value(labels.gpu_uuid) +
                          "\",device=\"nvidia0\",modelName=\"" +
                          metrics::escape_label_value(labels.model_name) + "\",Hostname=\"" +
                          metrics::escape_label_value(labels.hostname) + "\"}";
  std::string out;
  out += "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n";
  out += "DCGM_FI_DEV_POWER_USAGE" + lbl + " " + go_float(std::round(r.watts * 1000.0) / 1000.0) + "\n";
  out +=
      "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n"
      "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n";
  char mj[32];
  std::snprintf(mj, sizeof mj, "%.0f", std::floor(r.energy_joules * 1000.0));
  out += "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" + lbl + " " + mj + "\n";
  out +=
      "# HELP DCGM_FI_DEV_POWER_MGMT_LIMIT Power management limit (in W).\n"
      "# TYPE DCGM_FI_DEV_POWER_MGMT_LIMIT gauge\n";
  out += "DCGM_FI_DEV_POWER_MGMT_LIMIT" + lbl + " " + go_float(limit_watts) + "\n";
  return out;
}

}  // namespace cgn::sim
