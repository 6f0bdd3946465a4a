// How far one request may travel before its first token (DESIGN: up to max_attempts nodes).
// A node that closed the connection before any answer may have died of this very request (a
// prompt that crashes the engine): the request is then marked, and a second such close ends it,
// so one poisonous request takes down at most two nodes, never the fleet. Refused connects,
// timeouts, 429 and 5xx answers keep the plain attempt cap. One RetryBudget covers both legs of
// prefill/decode. Not thread-safe: one per request, on its handler's worker.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/http/types.h"

namespace cgn::router {

enum class AttemptFailure : uint8_t { kConnect, kTimeout, kClosed, kStatus429, kStatus5xx };

// The `reason` label of cgn_router_retries_total.
std::string_view reason_label(AttemptFailure f);

// An attempt that got no answer: refused/TLS-failed connects (the request never reached the
// node), timeouts, and everything else as a close.
AttemptFailure failure_of(http::HttpError e);
// An attempt answered 429 or 5xx; an agent's "the engine closed" 5xx (http::kFailureHeader) is a close.
AttemptFailure failure_of_answer(unsigned status, const http::Fields& headers);

class RetryBudget {
 public:
  // Records a failed attempt; false when the request must not go to another node.
  bool allows_retry_after(AttemptFailure f);
  // A node closed on this request once already.
  bool marked() const { return closed_once_; }

 private:
  bool closed_once_ = false;
};

}  // namespace cgn::router
