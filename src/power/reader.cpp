#include "power/reader.h"

#include <fmt/format.h>

#include <utility>

namespace cgn::power {

std::string_view to_string(Window w) {
  return w == Window::kAverage ? "average" : "instant";
}

std::string_view to_string(SourceError e) {
  switch (e) {
    case SourceError::kUnsupported:
      return "unsupported";
    case SourceError::kUnavailable:
      return "unavailable";
    case SourceError::kBadData:
      return "bad_data";
    case SourceError::kConfig:
      return "config";
  }
  return "unknown";
}

uint64_t counter_delta(uint64_t prev, uint64_t cur, std::optional<uint64_t> range) {
  if (cur >= prev) {
    return cur - prev;
  }
  if (range && *range >= prev) {
    return *range - prev + cur;
  }
  return cur;
}

std::optional<double> Snapshot::total_watts() const {
  std::optional<double> sum;
  for (const auto& d : devices) {
    if (d.latest.watts) {
      sum = sum.value_or(0) + *d.latest.watts;
    }
  }
  return sum;
}

uint64_t Snapshot::total_energy_uj() const {
  uint64_t sum = 0;
  for (const auto& d : devices) {
    sum += d.energy_uj;
  }
  return sum;
}

Reader::Reader(std::vector<std::unique_ptr<Source>> sources, const Clock& clock)
    : clock_(clock), log_(log::get("power")), changes_(log_) {
  for (auto& s : sources) {
    Entry e;
    e.status.name = s->name();
    e.status.kind = s->kind();
    e.source = std::move(s);
    entries_.push_back(std::move(e));
  }
}

Reader::~Reader() {
  stop();
}

Result<std::unique_ptr<Reader>, SourceError> Reader::from_config(const config::PowerConfig& cfg,
                                                                 const SourceRegistry& registry,
                                                                 const Clock& clock) {
  std::vector<std::unique_ptr<Source>> sources;
  for (const auto& sc : cfg.sources) {
    auto s = registry.create(sc);
    if (!s.ok()) {
      return make_error(s.error().code, fmt::format("power source \"{}\": {}", sc.name, s.error().message));
    }
    sources.push_back(std::move(s.value()));
  }
  return std::make_unique<Reader>(std::move(sources), clock);
}

void Reader::apply(Entry& e, std::vector<PowerSample> samples, Nanos now) {
  for (auto& [_, d] : e.devices) {
    d.present = false;
  }
  for (auto& s : samples) {
    auto [it, fresh] = e.devices.try_emplace(s.device);
    Device& d = it->second;
    DeviceReading& r = d.reading;
    if (!fresh && s.counter_uj && r.latest.counter_uj) {
      r.energy_uj += counter_delta(*r.latest.counter_uj, *s.counter_uj, s.counter_range_uj);
      r.from_counter = true;
    } else if (!fresh && !s.counter_uj && r.latest.watts && now > d.at) {
      r.energy_uj += static_cast<uint64_t>(*r.latest.watts * static_cast<double>(now - d.at) / 1e3);
      r.from_counter = false;
    } else if (fresh) {
      r.from_counter = s.counter_uj.has_value();
    }
    r.latest = std::move(s);
    d.at = now;
    d.present = true;
  }
}

void Reader::poll() {
  for (size_t i = 0;; ++i) {
    Source* src = nullptr;
    {
      std::lock_guard lock(mu_);
      if (i >= entries_.size()) {
        ++polls_;
        return;
      }
      src = entries_[i].source.get();
    }
    SourceResult got = src->read();  // outside the lock: a read may block for its timeout
    Nanos now = clock_.now();
    std::lock_guard lock(mu_);
    Entry& e = entries_[i];
    if (got.ok()) {
      ++e.status.reads;
      e.status.up = true;
      e.status.last_error.clear();
      apply(e, std::move(got.value()), now);
      changes_.update(e.status.name, "up", spdlog::level::info, "power source reads",
                      log::kv("source", e.status.name), log::kv("kind", e.status.kind),
                      log::kv("devices", e.devices.size()));
    } else {
      ++e.status.errors;
      e.status.up = false;
      e.status.last_error = got.error().message;
      changes_.update(e.status.name, fmt::format("down:{}", to_string(got.error().code)), spdlog::level::warn,
                      "power source failed; its devices are unknown until it reads again",
                      log::kv("source", e.status.name), log::kv("kind", e.status.kind),
                      log::kv("error", got.error().message));
    }
  }
}

Snapshot Reader::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  s.polls = polls_;
  for (const auto& e : entries_) {
    s.sources.push_back(e.status);
    if (!e.status.up) {
      continue;
    }
    for (const auto& [_, d] : e.devices) {
      if (d.present) {
        s.devices.push_back(d.reading);
      }
    }
  }
  return s;
}

void Reader::start(std::chrono::milliseconds interval) {
  stop();
  {
    std::lock_guard lock(run_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this, interval] {
    std::unique_lock lock(run_mu_);
    while (!stopping_) {
      lock.unlock();
      poll();
      lock.lock();
      run_cv_.wait_for(lock, interval, [this] { return stopping_; });
    }
  });
}

void Reader::stop() {
  {
    std::lock_guard lock(run_mu_);
    stopping_ = true;
  }
  run_cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

}  // namespace cgn::power
