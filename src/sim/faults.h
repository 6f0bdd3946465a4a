// Fault injection, as data. A FaultPlan comes from the --sim-fault flag (every
// request, or a deterministic fraction of them), from a rule file matching the
// request (fault_rules.h), or from a request's X-Sim-Fault header sent straight
// to the simulator (the router and the agent never forward it). The engine applies `error_status` (it fails
// the request when its first token would have come, so the client sees 429/500/503 before any token and a
// router may retry); the HTTP shell applies the rest (refuse, drop, stall, slow start, exit), which are about
// sockets.
//
// Syntax: comma-separated items, at most 16, at most 1024 bytes:
//   error=429|500|503      fail before the first token with this status
//   drop_after=N           close the stream after N SSE events
//   stall=DURATION[@N]     stop writing for DURATION after N events (default 0)
//   slow_start=DURATION    hold the request DURATION before it enters the engine
//   exit                   the process exits (status 1) when the request arrives
//   refuse                 (flag only) accept no connections
//   rate=F                 (flag only) apply to a fraction F in [0,1] of requests
//   confidence=F           not a fault: the simulated model's confidence in (0,1] (logprob = ln F
//                          for every sampled token, logprobs.h), for tests of logprob consumers
// DURATION is an integer with a unit: ms or s ("250ms", "2s").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/result.h"

namespace cgn::sim {

enum class FaultError { kSyntax, kTooLong, kBadValue, kNotAllowedHere, kRead };

struct FaultPlan {
  int error_status = 0;
  uint32_t drop_after_events = 0;
  Nanos stall = 0;
  uint32_t stall_after_events = 0;
  Nanos slow_start = 0;
  bool exit_process = false;
  bool refuse_connections = false;
  double rate = 1.0;
  double confidence = 0;  // 0 = unset (logprobs.h's default)

  bool empty() const {
    return error_status == 0 && drop_after_events == 0 && stall == 0 && slow_start == 0 && !exit_process &&
           !refuse_connections && confidence == 0;
  }
};

inline constexpr size_t kMaxFaultSpecBytes = 1024;
inline constexpr size_t kMaxFaultItems = 16;

// from_header = true rejects the flag-only items (refuse, rate).
Result<FaultPlan, FaultError> parse_fault_spec(std::string_view spec, bool from_header);

// Whether a flag-level plan with rate < 1 applies to this request
// (deterministic in the request id, so reruns fail the same requests).
bool fault_applies(const FaultPlan& plan, std::string_view request_id);

// Header plan overrides the flag plan item by item.
FaultPlan merge_faults(const FaultPlan& flag, const FaultPlan& header);

}  // namespace cgn::sim
