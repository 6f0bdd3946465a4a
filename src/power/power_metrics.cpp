#include "power/power_metrics.h"

namespace cgn::power {

PowerMetrics::PowerMetrics(metrics::Registry& registry, std::function<Snapshot()> snapshot)
    : registry_(registry),
      snapshot_(std::move(snapshot)),
      watts_(registry.gauge("cgn_power_watts",
                            "Power draw in W, per source and device (absent while unknown)",
                            {"source", "device"})),
      energy_(registry.counter("cgn_power_energy_joules_total",
                               "Energy in J since cgn-power first saw the device (counter deltas where the "
                               "device has a counter, else power x time)",
                               {"source", "device"})),
      limit_(registry.gauge("cgn_power_limit_watts", "The device's enforced power limit in W, where known",
                            {"source", "device"})),
      up_(registry.gauge("cgn_power_source_up", "1 while the source reads, 0 while it fails",
                         {"source", "kind"})),
      errors_(registry.counter("cgn_power_source_errors_total", "Failed reads of the source",
                               {"source", "kind"})) {
  callback_ = registry_.add_collect_callback([this] { collect(); });
}

PowerMetrics::~PowerMetrics() {
  registry_.remove_collect_callback(callback_);
}

void PowerMetrics::collect() {
  Snapshot s = snapshot_();
  watts_.clear();
  energy_.clear();
  limit_.clear();
  up_.clear();
  errors_.clear();
  for (const auto& d : s.devices) {
    metrics::Labels l{d.latest.source, d.latest.device};
    if (d.latest.watts) {
      watts_.with(l).set(*d.latest.watts);
    }
    energy_.with(l).add(uj_to_joules(d.energy_uj));
    if (d.latest.power_limit_watts) {
      limit_.with(l).set(*d.latest.power_limit_watts);
    }
  }
  for (const auto& src : s.sources) {
    metrics::Labels l{src.name, src.kind};
    up_.with(l).set(src.up ? 1 : 0);
    errors_.with(l).inc(src.errors);
  }
}

}  // namespace cgn::power
