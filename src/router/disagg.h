// Disaggregated prefill/decode in the router (docs/design/principles.md,
// docs/architecture/disaggregation.md): vLLM's NixlConnector protocol, run by the router as two legs of one
// client request.
//
//   1. Prefill leg: the client's body rewritten (prefill_body: max_tokens 1, stream false, no
//      stream_options/min_tokens, kv_transfer_params {do_remote_decode: true, ...}) to the
//      prefill node with the best overlap; up to max_attempts prefill nodes before it answers.
//   2. Decode leg: the client's body with the returned kv_transfer_params (decode_body) to a
//      decode node chosen by load, then overlap (order_for_decode); its answer, streamed or not,
//      is the client's. No params (a stop token first) -> the original body: decode recomputes.
//
// Both legs carry the same X-Request-Id; X-CGN-Role says prefill or decode. A model is served
// disaggregated when a node serving it has the role prefill or decode ([[router.nodes]] role);
// when no prefill node is eligible the request is served aggregated on a decode/both node if
// [router.disaggregation] fallback = "aggregated" (the default), else it gets a 503.
//
// The pure functions are unit-tested in disagg_test.cpp; PdRouter runs the prefill leg for
// Gateway's request flow (gateway.cpp calls mode() and prefill(); the decode leg is the gateway's
// ordinary attempt loop with the body and role PdRouter hands back). Thread-safety: PdRouter is
// a short-lived view of the Gateway on one server worker; it takes the gateway's core mutex only
// around routing decisions and tickets.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/state_store.h"
#include "core/http/server.h"
#include "core/openai_error.h"
#include "core/result.h"
#include "router/retry_budget.h"
#include "routing/router_core.h"

namespace cgn::router {

class Gateway;

namespace disagg {

enum class DisaggError { kNotAnObject };

// The prefill leg's body, or an error when `client_body` is not a JSON object.
Result<std::string, DisaggError> prefill_body(std::string_view client_body);

// The handoff a prefill answer carries: its kv_transfer_params when that is a non-empty object;
// nullopt otherwise (a stop token came first, or the body is not a completion).
std::optional<nlohmann::json> handoff_params(std::string_view prefill_answer);

// The decode leg's body: the client's body with kv_transfer_params set to `params`.
std::string decode_body(std::string_view client_body, const nlohmann::json& params);

// Decode candidates: least loaded first, then the longest overlap; stable otherwise.
void order_for_decode(std::vector<routing::Candidate>& ranked);

}  // namespace disagg

class PdRouter {
 public:
  explicit PdRouter(Gateway& g) : g_(g) {}

  enum class Mode {
    kAggregated,     // no node serving the model has a prefill or decode role
    kDisaggregated,  // run the prefill leg, then decode
  };
  Mode mode(std::string_view model) const;

  // One prefill target (resolved under the gateway's lock).
  struct Target {
    std::string node;
    cluster::NodeEndpoint endpoint;
    routing::NodeIndex index = routing::kNoNode;
  };
  // Builds the upstream request for a leg (the gateway's header rules): target, body, role.
  using MakeRequest =
      std::function<http::Request(const Target&, const std::string& body, std::string_view role)>;

  struct Leg {
    // The client has been answered (an error, a relayed prefill answer, or the client left):
    // the gateway stops here.
    bool done = false;
    // The decode leg's body; nullopt: the client's own body (decode recomputes the prompt).
    std::optional<std::string> decode_body;
    std::string prefill_node;                          // the prefill node that answered; empty when none did
    std::chrono::steady_clock::time_point answered{};  // when it answered (handoff timing)
    // The request's retries so far; the decode leg goes on with it (a prefill node that closed
    // on the request counts against the decode leg too).
    RetryBudget retries;
  };

  // Runs the prefill leg for `rr` (role is set to kPrefill for the decision). On success the
  // gateway continues with the decode leg (rr.role = kDecode, body = decode_body).
  boost::asio::awaitable<Leg> prefill(http::Exchange& ex, const http::Request& req, routing::RouteRequest rr,
                                      const std::string& request_id, std::string_view endpoint_label,
                                      std::chrono::steady_clock::time_point start, const MakeRequest& make);

 private:
  // Answers the client with `e` and records the request.
  boost::asio::awaitable<void> fail(http::Exchange& ex, const ApiError& e, const std::string& request_id,
                                    std::string_view model, std::string_view endpoint,
                                    std::chrono::steady_clock::time_point start, uint32_t retry_after_s = 0);

  Gateway& g_;
};

}  // namespace cgn::router
