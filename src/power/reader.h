// The Reader polls the configured sources and keeps the latest sample of every device plus its
// energy since the reader started: from counter deltas where the device has a counter (a counter
// below its last value wrapped at counter_range_uj, or was reset where it has no range), else from
// power × time. A source that fails is down: its devices leave the snapshot (unknown, never 0 W)
// and the failure is logged once, as is the recovery. cgn-power runs one; cgn-agent embeds one when
// no daemon is configured.
//
// Threads: poll() from one thread at a time (start() runs it on the reader's own thread);
// snapshot() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/result.h"
#include "power/registry.h"
#include "power/source.h"

namespace cgn::power {

struct DeviceReading {
  PowerSample latest;         // the last good sample
  uint64_t energy_uj = 0;     // since the reader first saw the device
  bool from_counter = false;  // energy_uj comes from the device's counter
};

struct SourceStatus {
  std::string name;
  std::string kind;
  bool up = false;
  uint64_t reads = 0;   // successful reads
  uint64_t errors = 0;  // failed reads
  std::string last_error;
};

struct Snapshot {
  std::vector<DeviceReading> devices;  // devices of sources that are up, by (source, device)
  std::vector<SourceStatus> sources;   // in configuration order
  uint64_t polls = 0;
  // Sum of the devices' watts (absent when no device reads watts) and energy.
  std::optional<double> total_watts() const;
  uint64_t total_energy_uj() const;
};

class Reader {
 public:
  explicit Reader(std::vector<std::unique_ptr<Source>> sources, const Clock& clock = SteadyClock::instance());
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Builds every configured source through `registry`; the first one that cannot be built is the
  // error (naming the source).
  static Result<std::unique_ptr<Reader>, SourceError> from_config(
      const config::PowerConfig& cfg, const SourceRegistry& registry = builtin_sources(),
      const Clock& clock = SteadyClock::instance());

  // Reads every source once.
  void poll();
  Snapshot snapshot() const;

  // Polls at once and then every `interval` on a thread of the reader's own, until stop().
  void start(std::chrono::milliseconds interval);
  void stop();

 private:
  struct Device {
    DeviceReading reading;
    Nanos at = 0;
    bool present = false;  // in the source's last good read
  };
  struct Entry {
    std::unique_ptr<Source> source;
    SourceStatus status;
    std::map<std::string, Device> devices;
  };

  void apply(Entry& e, std::vector<PowerSample> samples, Nanos now);

  const Clock& clock_;
  log::Logger log_;
  log::StateChangeLogger changes_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t polls_ = 0;

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace cgn::power
