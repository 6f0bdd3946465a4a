// The clock seam. Everything that reasons about time (routing TTLs, the
// simulator's timing model, the benchmark's virtual time) takes a Clock&
// so tests and the deterministic benchmark can drive time by hand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace cgn {

// Monotonic nanoseconds since an arbitrary epoch.
using Nanos = int64_t;

constexpr Nanos kNanosPerMicro = 1'000;
constexpr Nanos kNanosPerMilli = 1'000'000;
constexpr Nanos kNanosPerSecond = 1'000'000'000;

inline constexpr Nanos seconds_to_nanos(double s) {
  return static_cast<Nanos>(s * 1e9);
}
inline constexpr double nanos_to_seconds(Nanos n) {
  return static_cast<double>(n) / 1e9;
}

// Thread safety: implementations must allow now() from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Nanos now() const = 0;
};

// The real monotonic clock.
class SteadyClock final : public Clock {
 public:
  Nanos now() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static SteadyClock& instance() {
    static SteadyClock clock;
    return clock;
  }
};

// A clock that only moves when told to. Safe to read and advance from any thread.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = 0) : now_(start) {}
  Nanos now() const override { return now_.load(std::memory_order_acquire); }
  void advance(Nanos delta) { now_.fetch_add(delta, std::memory_order_acq_rel); }
  void set(Nanos t) { now_.store(t, std::memory_order_release); }

 private:
  std::atomic<Nanos> now_;
};

}  // namespace cgn
