#include "router/request_plan.h"

#include <fmt/format.h>

#include "router/coro_warnings.h"

namespace cgn::router {

namespace asio = boost::asio;

namespace {

// The error for a request no node can take now.
ApiError route_refusal(const RequestContext& ctx, routing::RouteError code, GatewayServices& s,
                       uint32_t& retry_after_s) {
  if (code == routing::RouteError::kAllOverloaded) {
    s.metrics.admission_rejected(ctx.model, "overloaded");
    retry_after_s = std::max<uint32_t>(1, s.admission.retry_after_s());
    return too_many_requests("Every node serving '" + ctx.model + "' is overloaded; retry later.",
                             "overloaded");
  }
  return service_unavailable(
      "No node can serve model '" + ctx.model + "' now (" + std::string(routing::to_string(code)) + ").",
      "no_healthy_node");
}

}  // namespace

asio::awaitable<bool> serve_ranked(RequestContext& ctx, Dispatcher& d, GatewayServices& s,
                                   const Dispatcher::Step& step, bool decode_order) {
  auto ranked = s.nodes.rank(ctx.route(), s.max_attempts, decode_order);
  if (!ranked) {
    uint32_t retry_after_s = 0;
    const ApiError e = route_refusal(ctx, ranked.error().code, s, retry_after_s);
    co_await answer_error(ctx, s.metrics, e, retry_after_s);
    co_return false;
  }
  const routing::Decision& decision = ranked->decision;
  const double ratio =
      decision.request_blocks > 0
          ? static_cast<double>(decision.ranked.front().overlap_blocks) / decision.request_blocks
          : 0.0;
  s.metrics.decision(ranked->decide_s, ratio);
  if (!decision.deadline_ok) {
    s.metrics.admission_rejected(ctx.model, "deadline");
    const ApiError e =
        too_many_requests(fmt::format("The estimated time to first token ({:.3f} s) exceeds the "
                                      "X-CGN-Deadline-Ms budget of {} ms.",
                                      decision.ranked.front().ttft_s, ctx.deadline_ms),
                          "deadline_exceeded");
    co_await answer_error(ctx, s.metrics, e, std::max<uint32_t>(1, s.admission.retry_after_s()));
    co_return false;
  }
  Dispatcher::Outcome out = co_await d.run(ctx, step, ranked->targets);
  if (out.kind == Dispatcher::Outcome::Kind::kFailed) {
    co_await d.answer_failure(ctx, out);
  }
  co_return out.kind == Dispatcher::Outcome::Kind::kDone;
}

asio::awaitable<void> AggregatedPlan::serve(RequestContext& ctx, Dispatcher& d) {
  ctx.role = routing::RoleWanted::kAny;
  const Dispatcher::Step step;  // role both, the client's body, relayed
  co_await serve_ranked(ctx, d, s_, step, /*decode_order=*/false);
}

}  // namespace cgn::router
