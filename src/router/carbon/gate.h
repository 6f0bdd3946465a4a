// Gate: the carbon-aware admission decision. It holds the latest successful Reading (from the
// Poller) and answers, for one request's X-CGN-Priority, admit or defer:
//
//   no reading yet                  -> kNoReading: fail open, every request passes
//   reading older than 3 intervals  -> kStale:     fail open, every request passes
//   reading <= threshold            -> kAdmit:     every request passes ("at" the threshold passes)
//   reading >  threshold            -> kDefer:     priority "low" is deferred (429), normal/high pass
//
// A deferred request is told to come back at the next poll (Retry-After, whole seconds, >= 1).
// Request intake asks it for chat, completions and embeddings; gRPC Generate (when it exists)
// asks it the same way with its priority.
//
// Threads: every method is safe from any thread (one mutex; a check is a few comparisons).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "router/carbon/provider.h"

namespace cgn::router::carbon {

enum class GateState { kNoReading, kStale, kAdmit, kDefer };
// The label of cgn_router_carbon_gate_state{state} for each GateState, in enum order.
inline constexpr std::string_view kGateStateLabels[] = {"no_reading", "stale", "admit", "defer"};
inline std::string_view state_label(GateState s) {
  return kGateStateLabels[static_cast<size_t>(s)];
}

struct GateOptions {
  double threshold_gco2_per_kwh = 400;
  Nanos poll_interval = 900 * kNanosPerSecond;
  std::string provider;  // labels
  std::string zone;
};

class Gate {
 public:
  Gate(GateOptions options, const Clock& clock);

  struct Decision {
    bool admit = true;
    uint32_t retry_after_s = 0;  // when deferred
    double gco2_per_kwh = 0;     // the reading that deferred it
  };
  // The decision for one request with X-CGN-Priority `priority` ("" when not sent = normal).
  Decision check(std::string_view priority) const;

  // A successful poll (the Poller's thread).
  void record(const Reading& r);
  // When the next poll is due (after a success: one interval; after a failure: the backoff).
  void set_next_poll(Nanos at);

  struct Snapshot {
    GateState state = GateState::kNoReading;
    std::optional<double> gco2_per_kwh;  // nullopt before the first reading
    std::optional<double> age_s;
  };
  Snapshot snapshot() const;
  const GateOptions& options() const { return options_; }

 private:
  GateState state_locked(Nanos now) const;

  const GateOptions options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::optional<Reading> reading_;
  Nanos read_at_ = 0;
  Nanos next_poll_ = 0;
};

}  // namespace cgn::router::carbon
