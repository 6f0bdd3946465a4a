// Request intake, body stage: everything the router decides about an inference request before
// it routes it. (The header stage, the API key, runs earlier in check_head, intake.h.)
//
//   client headers  X-CGN-Priority (low|normal|high) and X-CGN-Deadline-Ms (1..86400000) are
//                   the only routing headers accepted from outside; anything else is a 400.
//   body            parsed once (core/canonical.h) within [router.limits]; kv_transfer_params
//                   from a client is a 400 (only the router sets them between P/D legs).
//   model           some node must serve it (404 model_not_found otherwise).
//   routing signal  prefix digests of the canonical prompt, the session key.
//   admission       the (model, role) in-flight cap: 429 queue_full with Retry-After.
//
// Every refusal is answered here (OpenAI-style JSON with the request id) and recorded; an
// admitted request comes back with its context, its admission slot and whether it is served
// disaggregated.
//
// Threads: admit() runs on the server worker that owns `ex`; the services are thread-safe.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <optional>

#include "core/canonical.h"
#include "router/dispatcher.h"
#include "router/intake.h"

namespace cgn::router {

inline constexpr std::string_view kUnknownModel = "_unknown";  // the model label before it is known

struct ClientHeaders {
  std::string priority;  // empty: not sent
  int64_t deadline_ms = 0;
};
// X-CGN-Priority and X-CGN-Deadline-Ms, checked.
Result<ClientHeaders, ApiError> parse_client_headers(const http::Request& req);

struct Admitted {
  RequestContext ctx;
  Admission::Slot slot;  // held until the request is done
  bool disaggregated = false;
};

// Runs the body stage for `ex`; nullopt when the client has been refused (and answered).
boost::asio::awaitable<std::optional<Admitted>> admit(http::Exchange& ex, Endpoint endpoint,
                                                      GatewayServices& s, RejectionLog& rejections);

}  // namespace cgn::router
