#include "router/cascade_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/canonical.h"
#include "core/log.h"
#include "router/cascade/confidence.h"
#include "router/coro_warnings.h"
#include "router/disagg.h"
#include "router/router_log.h"

namespace cgn::router {

namespace asio = boost::asio;

namespace {

constexpr std::string_view kStepHeader = "X-CGN-Cascade-Step";

double ms_since(std::chrono::steady_clock::time_point t) {
  return seconds_since(t) * 1000.0;
}

// The `usage` counts of a buffered answer (0 when absent).
std::pair<double, double> usage_of(const nlohmann::ordered_json& body) {
  const auto u = body.find("usage");
  if (u == body.end() || !u->is_object()) {
    return {0.0, 0.0};
  }
  return {u->value("prompt_tokens", 0.0), u->value("completion_tokens", 0.0)};
}

}  // namespace

void CascadePlan::set_step_header(RequestContext& ctx, size_t i) {
  ctx.answer_headers.erase(std::remove_if(ctx.answer_headers.begin(), ctx.answer_headers.end(),
                                          [](const auto& h) { return h.first == kStepHeader; }),
                           ctx.answer_headers.end());
  ctx.answer_headers.emplace_back(std::string(kStepHeader), std::to_string(i + 1));
}

void CascadePlan::route_step(RequestContext& ctx, size_t i) {
  ctx.model = cascade_.steps[i].model;
  if (i < step_digests_.size()) {
    ctx.digests = step_digests_[i];
  }
}

std::chrono::milliseconds CascadePlan::gated_budget(const RequestContext& ctx) {
  if (deadline_ms_ <= 0) {
    return std::chrono::milliseconds(0);
  }
  // The last step's estimated time to first token on its best node (0 when none can serve now:
  // the last step will say so itself).
  double last_ttft_ms = 0;
  routing::RouteRequest rr = ctx.route();
  rr.model = cascade_.steps.back().model;
  if (!step_digests_.empty()) {
    rr.digests = step_digests_.back();
  }
  rr.deadline = 0;
  if (auto ranked = s_.nodes.rank(rr, 1, false); ranked && !ranked->decision.ranked.empty()) {
    last_ttft_ms = ranked->decision.ranked.front().ttft_s * 1000.0;
  }
  const double left = static_cast<double>(deadline_ms_) - ms_since(ctx.start) - last_ttft_ms -
                      static_cast<double>(cascade_.deadline_reserve_ms);
  // At least 1 ms when positive, so "some budget" never reads as "no deadline".
  return std::chrono::milliseconds(left >= 1.0 ? static_cast<int64_t>(left) : -1);
}

asio::awaitable<void> CascadePlan::serve(RequestContext& ctx, Dispatcher& d) {
  chat_ = ctx.endpoint == cgn::endpoint_name(cgn::Endpoint::kChat);
  deadline_ms_ = ctx.deadline_ms;
  auto bodies = cascade::read_client_body(ctx.req.body(), chat_);
  if (!bodies) {
    const ApiError e = bad_request("The request body must be a JSON object.");
    co_await answer_error(ctx, s_.metrics, e);
    co_return;
  }
  bodies_ = std::move(*bodies);
  const size_t last = cascade_.steps.size() - 1;
  for (size_t i = 0; i < last; ++i) {
    if (has_tools_) {
      s_.metrics.cascade_step(alias_, i + 1, "skipped");
      continue;
    }
    const Gate g = co_await gated_step(ctx, d, i);
    if (g != Gate::kNext) {
      co_return;
    }
  }
  co_await last_step(ctx, d);
}

asio::awaitable<CascadePlan::Gate> CascadePlan::gated_step(RequestContext& ctx, Dispatcher& d, size_t i) {
  const config::CascadeStepConfig& step = cascade_.steps[i];
  const auto skip = [&](std::string_view why) {
    s_.metrics.cascade_step(alias_, i + 1, "skipped");
    CGN_LOG_DEBUG(router_log(), "cascade step skipped", log::kv("request_id", ctx.request_id),
                  log::kv("alias", alias_), log::kv("model", step.model), log::kv("reason", why));
    return Gate::kNext;
  };
  Dispatcher::Step run;
  run.buffered = true;
  if (deadline_ms_ > 0) {
    run.budget = gated_budget(ctx);
    if (run.budget.count() <= 0) {
      co_return skip("deadline");
    }
  }
  route_step(ctx, i);
  ctx.role = routing::RoleWanted::kAny;
  ctx.deadline_ms = deadline_ms_ > 0 ? run.budget.count() : 0;
  // A disaggregated model's step runs prefill then decode (PdPlan::serve_held), as its requests
  // do: its prefill nodes are not sent whole generations, nor its decode nodes whole prefills.
  const bool pd = s_.nodes.lookup(step.model).disaggregated;
  Admission::Slot slot = s_.admission.try_acquire(step.model, pd ? "decode" : "both");
  Admission::Slot prefill_slot = pd ? s_.admission.try_acquire(step.model, "prefill") : Admission::Slot{};
  if (!slot.held() || (pd && !prefill_slot.held())) {
    co_return skip("queue_full");
  }
  auto ranked = s_.nodes.rank(ctx.route(), s_.max_attempts, false);
  if (!ranked) {
    co_return skip(routing::to_string(ranked.error().code));
  }
  if (!ranked->decision.deadline_ok) {
    co_return skip("deadline");
  }
  step_body_ = cascade::body_for(*bodies_, step.model, /*gated=*/true);
  ctx.body_override = &step_body_;
  run.body = &step_body_;
  prefill_node_.clear();
  const auto began = std::chrono::steady_clock::now();
  Dispatcher::Outcome out;
  if (pd) {
    PdPlan plan(s_);
    out = co_await plan.serve_held(ctx, d, run.budget);
    prefill_node_ = plan.prefill_node();
  } else {
    out = co_await d.run(ctx, run, ranked->targets);
  }
  if (out.kind == Dispatcher::Outcome::Kind::kClientLeft) {
    co_return Gate::kClientLeft;  // recorded as 499 by the dispatcher
  }
  s_.metrics.cascade_gate(alias_, seconds_since(began));
  const auto fail = [&](std::string_view why) {
    s_.metrics.cascade_step(alias_, i + 1, "failed");
    CGN_LOG_DEBUG(router_log(), "cascade step failed; escalating", log::kv("request_id", ctx.request_id),
                  log::kv("alias", alias_), log::kv("model", step.model), log::kv("reason", why));
    return Gate::kNext;
  };
  if (out.kind != Dispatcher::Outcome::Kind::kHeld) {
    co_return fail(out.last_error_text.empty() ? "every attempt failed" : out.last_error_text);
  }
  if (out.answer->result_int() != 200) {
    co_return fail(fmt::format("status {}", out.answer->result_int()));
  }
  auto answer = cascade::read_answer(out.answer->body(), chat_);
  if (!answer) {
    co_return fail(answer.error().message);
  }
  const cascade::ConfidenceRule rule = cascade::rule_of(step);
  bool accepted = true;
  for (const auto& lps : answer->token_logprobs) {
    accepted = accepted && cascade::judge(lps, rule).accepted;
  }
  if (!accepted) {
    // The cheap model's work counts under its model, though the client never sees it.
    const auto [prompt, completion] = usage_of(answer->body);
    s_.metrics.tokens(step.model, prompt, completion, out.node);
    s_.metrics.cascade_step(alias_, i + 1, "escalated");
    CGN_LOG_DEBUG(router_log(), "cascade step escalated", log::kv("request_id", ctx.request_id),
                  log::kv("alias", alias_), log::kv("model", step.model));
    co_return Gate::kNext;
  }
  s_.metrics.cascade_step(alias_, i + 1, "accepted");
  co_await answer_accepted(ctx, i, out.node, std::move(*answer));
  co_return Gate::kAccepted;
}

asio::awaitable<void> CascadePlan::answer_accepted(RequestContext& ctx, size_t i, const std::string& node,
                                                   cascade::GatedAnswer answer) {
  set_step_header(ctx, i);
  const auto [prompt_tokens, completion_tokens] = usage_of(answer.body);
  http::Fields headers;
  headers.set("X-CGN-Node", node);
  if (!prefill_node_.empty()) {
    headers.set("X-CGN-Prefill-Node", prefill_node_);
  }
  headers.set("X-Request-Id", ctx.request_id);
  for (const auto& [name, value] : ctx.answer_headers) {
    headers.set(name, value);
  }
  bool client_ok = true;
  if (!ctx.stream) {
    http::Response res = http::make_response(
        200, cascade::buffered_for_client(std::move(answer), bodies_->ask), "application/json");
    for (const auto& f : headers) {
      res.set(f.name_string(), f.value());
    }
    res.prepare_payload();
    client_ok = (co_await ctx.ex.respond(std::move(res))).ok();
  } else {
    headers.set(http::Field::content_type, "text/event-stream");
    headers.set(http::Field::cache_control, "no-cache");
    const std::vector<std::string> events = cascade::stream_for_client(answer, bodies_->ask);
    client_ok = (co_await ctx.ex.begin_stream(200, std::move(headers))).ok();
    bool first = true;
    for (const std::string& data : events) {
      if (!client_ok) {
        break;
      }
      http::SseEvent e;
      e.data = data;
      client_ok = (co_await ctx.ex.write_event(e)).ok();
      if (first) {
        s_.metrics.ttft(seconds_since(ctx.start));
        first = false;
      }
    }
    if (client_ok) {
      (void)co_await ctx.ex.end_stream();
    }
  }
  s_.metrics.tokens(ctx.model, prompt_tokens, completion_tokens, node);
  s_.metrics.request_done(ctx.model, ctx.endpoint, client_ok && ctx.ex.client_open() ? 200 : kClientClosed,
                          seconds_since(ctx.start));
}

asio::awaitable<void> CascadePlan::last_step(RequestContext& ctx, Dispatcher& d) {
  const size_t i = cascade_.steps.size() - 1;
  const std::string& model = cascade_.steps[i].model;
  set_step_header(ctx, i);
  route_step(ctx, i);
  base_body_ = cascade::body_for(*bodies_, model, /*gated=*/false);
  ctx.body_override = &base_body_;
  if (deadline_ms_ > 0) {
    const double left = static_cast<double>(deadline_ms_) - ms_since(ctx.start);
    if (left < 1.0) {
      s_.metrics.cascade_step(alias_, i + 1, "failed");
      s_.metrics.admission_rejected(model, "deadline");
      const ApiError e = too_many_requests(
          fmt::format("The cascade's earlier steps used the X-CGN-Deadline-Ms budget of {} ms.",
                      deadline_ms_),
          "deadline_exceeded");
      co_await answer_error(ctx, s_.metrics, e, std::max<uint32_t>(1, s_.admission.retry_after_s()));
      co_return;
    }
    ctx.deadline_ms = static_cast<int64_t>(left);
  }
  const NodeTable::ModelInfo info = s_.nodes.lookup(model);
  Admission::Slot slot = s_.admission.try_acquire(model, info.disaggregated ? "decode" : "both");
  if (!slot.held()) {
    s_.metrics.cascade_step(alias_, i + 1, "failed");
    s_.metrics.admission_rejected(model, "queue_full");
    const ApiError e = too_many_requests(
        "Too many requests in flight for model '" + model + "'; retry later.", "queue_full");
    co_await answer_error(ctx, s_.metrics, e, std::max<uint32_t>(1, s_.admission.retry_after_s()));
    co_return;
  }
  bool served = false;
  if (info.disaggregated) {
    PdPlan plan(s_);
    co_await plan.serve(ctx, d);
    served = plan.served();
  } else {
    ctx.role = routing::RoleWanted::kAny;
    const Dispatcher::Step step;  // role both, ctx's body, relayed
    served = co_await serve_ranked(ctx, d, s_, step, /*decode_order=*/false);
  }
  s_.metrics.cascade_step(alias_, i + 1, served ? "accepted" : "failed");
}

}  // namespace cgn::router
