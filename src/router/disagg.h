// Disaggregated prefill/decode in the router (docs/design/principles.md,
// docs/architecture/disaggregation.md): vLLM's NixlConnector protocol, run by the router as two legs of one
// client request.
//
//   1. Prefill leg: the client's body rewritten (prefill_body: max_tokens 1, stream false, no
//      stream_options/min_tokens, kv_transfer_params {do_remote_decode: true, ...}) to the
//      prefill node with the best overlap; up to max_attempts prefill nodes before it answers.
//   2. Decode leg: the client's body with the returned kv_transfer_params (decode_body) to a
//      decode node chosen by load, then overlap (routing::order_for_decode); its answer, streamed or not,
//      is the client's. No params (a stop token first) -> the original body: decode recomputes.
//
// Both legs carry the same X-Request-Id; X-CGN-Role says prefill or decode. A model is served
// disaggregated when a node serving it has the role prefill or decode ([[router.nodes]] role);
// when no prefill node is eligible the request is served aggregated on a decode/both node if
// [router.disaggregation] fallback = "aggregated" (the default), else it gets a 503.
//
// The pure functions are unit-tested in disagg_test.cpp; PdPlan runs both legs on the
// Dispatcher (the decode leg is the aggregated path's relayed step with the body and role the
// prefill leg hands over). Thread-safety: a PdPlan lives for one request on one server worker.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "router/request_plan.h"
#include "routing/router_core.h"

namespace cgn::router {

namespace disagg {

enum class DisaggError { kNotAnObject };

// The prefill leg's body, or an error when `client_body` is not a JSON object.
Result<std::string, DisaggError> prefill_body(std::string_view client_body);

// The handoff a prefill answer carries: its kv_transfer_params when that is a non-empty object;
// nullopt otherwise (a stop token came first, or the body is not a completion).
std::optional<nlohmann::json> handoff_params(std::string_view prefill_answer);

// The decode leg's body: the client's body with kv_transfer_params set to `params`.
std::string decode_body(std::string_view client_body, const nlohmann::json& params);

}  // namespace disagg

// The two-step plan of a disaggregated request (request_plan.h): the prefill step buffered on
// the prefill nodes, then the decode step relayed from a decode node. The decode leg's admission
// slot is the request's (request_intake.h); the prefill leg takes its own (model, prefill) slot
// while it runs.
class PdPlan final : public RequestPlan {
 public:
  explicit PdPlan(GatewayServices& s) : s_(s) {}
  boost::asio::awaitable<void> serve(RequestContext& ctx, Dispatcher& d) override;
  // After serve(): whether the decode node's answer reached the client.
  bool served() const { return served_; }

  // A cascade's gated step (cascade_plan.h) on a disaggregated model: the prefill leg on
  // ctx.client_body() (the step's body), then the decode leg on the decode nodes, buffered; each
  // attempt within what is left of `budget` (0: no budget). The caller holds the (model, decode)
  // and (model, prefill) admission slots. Never answers the client: kHeld with the decode node's
  // answer (or the prefill node's refusal, not a 200), kFailed, or kClientLeft. No prefill node,
  // or every prefill attempt failed: decode recomputes when [router.disaggregation] fallback is
  // "aggregated", else kFailed.
  boost::asio::awaitable<Dispatcher::Outcome> serve_held(RequestContext& ctx, Dispatcher& d,
                                                         std::chrono::milliseconds budget);
  // After serve_held(): the prefill node that handed the request over; empty when none did.
  const std::string& prefill_node() const { return prefill_node_; }

 private:
  // Runs the prefill leg; the decode step to run next, or nullopt when the client has been
  // answered (an error, a relayed refusal) or has left.
  boost::asio::awaitable<std::optional<Dispatcher::Step>> prefill(RequestContext& ctx, Dispatcher& d);
  // Every prefill attempt failed: the decode step when [router.disaggregation] fallback allows
  // recomputing, else the client gets the failure.
  boost::asio::awaitable<std::optional<Dispatcher::Step>> prefill_failed(RequestContext& ctx, Dispatcher& d,
                                                                         Dispatcher::Outcome& out,
                                                                         size_t targets);
  // The prefill node answered 200: the decode step, with its kv_transfer_params when it sent some.
  Dispatcher::Step handoff(RequestContext& ctx, const Dispatcher::Outcome& out);

  GatewayServices& s_;
  bool served_ = false;
  std::string prefill_node_;
  std::string prefill_body_;
  std::string decode_body_;
};

}  // namespace cgn::router
