// CascadePlan: serves a [router.cascade] alias (docs/cascade.md). Each step but the last runs on
// its cheap model buffered, with the sampled tokens' logprobs, and is gated: when its confidence
// rule (cascade/confidence.h) accepts the answer, the client gets it (buffered, or re-chunked as
// a stream when it asked for one; cascade/answer.h) and the plan ends; otherwise the next step
// runs. The last step is the ordinary aggregated or P/D plan on the last model, relayed live.
//
// Per step: the (model, role) admission slot, the ranking, failover within the retry budget, and
// P/D when the step's model is served disaggregated (a gated step's decode leg buffered too); a
// gated step whose model's nodes are all busy, full or gone is skipped.
// With X-CGN-Deadline-Ms, a gated step runs only while the budget left exceeds the last step's
// estimated time to first token plus the alias's deadline_reserve_ms, and is cut off when it
// reaches that point; the last step gets what is left as its own deadline (deadline admission
// answers 429 deadline_exceeded when even that cannot be met). Requests with tools go straight
// to the last step (tool formats are not portable across models).
//
// Each step routes by the prompt's prefix digests for its own model (the digest seed names the
// model, so the alias's would match nothing a node of the step's model holds).
//
// Every answer carries X-CGN-Cascade-Step (the 1-based index of the step that served it, or of
// the last step for a refusal); cgn_router_cascade_steps_total counts each step's outcome and
// cgn_router_cascade_gate_seconds the time each gated step added.
//
// Threads: a plan lives for one request on one server worker.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "core/config.h"
#include "router/cascade/answer.h"
#include "router/request_plan.h"

namespace cgn::router {

class CascadePlan final : public RequestPlan {
 public:
  // `alias` and `cascade` outlive the plan (the router's configuration).
  // `step_digests`: the prompt's prefix digests for each step's model (request_intake.h).
  CascadePlan(GatewayServices& s, std::string_view alias, const config::CascadeAliasConfig& cascade,
              bool has_tools, std::vector<std::vector<Digest>> step_digests)
      : s_(s),
        alias_(alias),
        cascade_(cascade),
        has_tools_(has_tools),
        step_digests_(std::move(step_digests)) {}
  boost::asio::awaitable<void> serve(RequestContext& ctx, Dispatcher& d) override;

 private:
  enum class Gate { kAccepted, kNext, kClientLeft };
  // Runs gated step `i`; kAccepted when the client has its answer.
  boost::asio::awaitable<Gate> gated_step(RequestContext& ctx, Dispatcher& d, size_t i);
  // The last step, relayed.
  boost::asio::awaitable<void> last_step(RequestContext& ctx, Dispatcher& d);
  // Answers the client with an accepted gated answer.
  boost::asio::awaitable<void> answer_accepted(RequestContext& ctx, size_t i, const std::string& node,
                                               cascade::GatedAnswer answer);
  // With a deadline: what a gated step may use now (<= 0: skip it); 0 without one.
  std::chrono::milliseconds gated_budget(const RequestContext& ctx);
  void set_step_header(RequestContext& ctx, size_t i);
  // Points ctx at step `i`: its model and that model's prefix digests.
  void route_step(RequestContext& ctx, size_t i);

  GatewayServices& s_;
  std::string_view alias_;
  const config::CascadeAliasConfig& cascade_;
  bool has_tools_;
  std::vector<std::vector<Digest>> step_digests_;
  int64_t deadline_ms_ = 0;  // the client's, before any step used some of it
  bool chat_ = true;
  std::string base_body_;     // the current step's starting body (ctx.body_override)
  std::string step_body_;     // a gated step's body
  std::string prefill_node_;  // the prefill node of a disaggregated gated step; empty: none
  std::optional<cascade::StepBodies> bodies_;
};

}  // namespace cgn::router
