// Request intake, body stage: everything the router decides about an inference request before
// it routes it. (The header stage, the API key, runs earlier in check_head, intake.h.)
//
//   client headers  X-CGN-Priority (low|normal|high) and X-CGN-Deadline-Ms (1..86400000) are
//                   the only routing headers accepted from outside; anything else is a 400.
//   body            parsed once (core/canonical.h) within [router.limits]; kv_transfer_params
//                   from a client is a 400 (only the router sets them between P/D legs).
//   model           some node must serve it (404 model_not_found otherwise).
//   routing signal  prefix digests of the canonical prompt, the session key.
//   carbon          [router.carbon]: while the grid is over the threshold, priority "low" gets
//                   429 carbon_intensity_high with Retry-After (router/carbon/gate.h).
//   admission       the (model, role) in-flight cap: 429 queue_full with Retry-After.
//   cascade         a [router.cascade] alias (chat and completions only) is admitted here without a
//                   slot; its plan (cascade_plan.h) takes one per step.
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

// The body parsed within [router.limits]; kv_transfer_params from a client is refused (noted).
// previous_response_id non-null: the body is a Responses API request, parsed as its equivalent chat
// request, and its previous_response_id is stored there.
Result<ParsedRequest, ApiError> parse_body(const RequestContext& ctx, Endpoint endpoint, GatewayServices& s,
                                           RejectionLog& rejections,
                                           std::string* previous_response_id = nullptr);
// The routing signal of `ctx`: `digests` (prefix_digests() for the model the request goes to),
// prompt size, session key (X-Session-Id fallback).
void set_route(RequestContext& ctx, const ParsedRequest& pr, std::vector<Digest> digests);
// The prefix digests of `pr`'s prompt as a request for `model` has them (the seed names the model:
// a cascade step's differ from the alias's).
std::vector<Digest> prefix_digests(const ParsedRequest& pr, std::string_view model, uint32_t block_bytes);

struct Admitted {
  RequestContext ctx;
  Admission::Slot slot;  // held until the request is done
  bool disaggregated = false;
  std::string previous_response_id;  // /v1/responses only; empty: none
  // [router.cascade]: the alias the client named (it wins over a served model of that name), its
  // steps, and whether the request has tools; null: not a cascade. A cascade takes its admission
  // slots per step (cascade_plan.h), so `slot` is not held.
  const config::CascadeAliasConfig* cascade = nullptr;
  std::string_view cascade_alias;
  bool has_tools = false;
  std::vector<std::vector<Digest>> cascade_digests;  // per step: the prompt's digests for its model
};

// The carbon gate's answer for the request's priority: the 429 and its Retry-After when deferred,
// nullopt when it passes (or no gate is configured). gRPC Generate, when it exists, calls this too.
std::optional<std::pair<ApiError, uint32_t>> carbon_deferral(const RequestContext& ctx,
                                                             const GatewayServices& s);

// Runs the body stage for `ex`; nullopt when the client has been refused (and answered).
// `responses_api`: the body is a /v1/responses request (responses.h), routed as the equivalent
// chat request (`endpoint` is then kChat) under the endpoint label "responses".
boost::asio::awaitable<std::optional<Admitted>> admit(http::Exchange& ex, Endpoint endpoint,
                                                      GatewayServices& s, RejectionLog& rejections,
                                                      bool responses_api = false);

}  // namespace cgn::router
