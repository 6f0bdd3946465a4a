#include "router/carbon/gate.h"

#include <algorithm>

namespace cgn::router::carbon {

Gate::Gate(GateOptions options, const Clock& clock) : options_(std::move(options)), clock_(clock) {}

GateState Gate::state_locked(Nanos now) const {
  if (!reading_) {
    return GateState::kNoReading;
  }
  if (now - read_at_ > 3 * options_.poll_interval) {
    return GateState::kStale;
  }
  return reading_->gco2_per_kwh > options_.threshold_gco2_per_kwh ? GateState::kDefer : GateState::kAdmit;
}

Gate::Decision Gate::check(std::string_view priority) const {
  if (priority != "low") {
    return {};
  }
  const Nanos now = clock_.now();
  std::lock_guard lock(mu_);
  if (state_locked(now) != GateState::kDefer) {
    return {};
  }
  const Nanos wait = std::max<Nanos>(0, next_poll_ - now);
  const auto secs =
      static_cast<uint32_t>(std::min<Nanos>((wait + kNanosPerSecond - 1) / kNanosPerSecond, 86'400));
  return Decision{false, std::max<uint32_t>(1, secs), reading_->gco2_per_kwh};
}

void Gate::record(const Reading& r) {
  const Nanos now = clock_.now();
  std::lock_guard lock(mu_);
  reading_ = r;
  read_at_ = now;
}

void Gate::set_next_poll(Nanos at) {
  std::lock_guard lock(mu_);
  next_poll_ = at;
}

Gate::Snapshot Gate::snapshot() const {
  const Nanos now = clock_.now();
  std::lock_guard lock(mu_);
  Snapshot s;
  s.state = state_locked(now);
  if (reading_) {
    s.gco2_per_kwh = reading_->gco2_per_kwh;
    s.age_s = nanos_to_seconds(now - read_at_);
  }
  return s;
}

}  // namespace cgn::router::carbon
