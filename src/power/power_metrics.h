// cgn-power's /metrics, mirrored from the Reader's snapshot at every scrape:
//   cgn_power_watts{source,device}                 gauge; absent while unknown (never 0 W)
//   cgn_power_energy_joules_total{source,device}   counter; since the daemon first saw the device
//   cgn_power_limit_watts{source,device}           gauge; the enforced limit where known
//   cgn_power_source_up{source,kind}               1 while the source reads, else 0
//   cgn_power_source_errors_total{source,kind}     failed reads
// Thread-safe (the registry's collect callback runs on the scraping thread).
#pragma once

#include <cstdint>
#include <functional>

#include "core/metrics.h"
#include "power/reader.h"

namespace cgn::power {

class PowerMetrics {
 public:
  // `registry` and whatever `snapshot` reads must outlive this object.
  PowerMetrics(metrics::Registry& registry, std::function<Snapshot()> snapshot);
  ~PowerMetrics();
  PowerMetrics(const PowerMetrics&) = delete;
  PowerMetrics& operator=(const PowerMetrics&) = delete;

 private:
  void collect();

  metrics::Registry& registry_;
  std::function<Snapshot()> snapshot_;
  metrics::GaugeFamily& watts_;
  metrics::CounterFamily& energy_;
  metrics::GaugeFamily& limit_;
  metrics::GaugeFamily& up_;
  metrics::CounterFamily& errors_;
  uint64_t callback_ = 0;
};

}  // namespace cgn::power
