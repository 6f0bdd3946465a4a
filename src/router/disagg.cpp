#include "router/disagg.h"

#include <algorithm>

#include "core/log.h"
#include "router/coro_warnings.h"
#include "router/router_log.h"

namespace cgn::router {

namespace asio = boost::asio;
using nlohmann::json;

namespace disagg {

Result<std::string, DisaggError> prefill_body(std::string_view client_body) {
  json j = json::parse(client_body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(DisaggError::kNotAnObject, "the request body is not a JSON object");
  }
  j["max_tokens"] = 1;
  if (j.contains("max_completion_tokens")) {
    j["max_completion_tokens"] = 1;
  }
  j["stream"] = false;
  for (const char* key : {"stream_options", "min_tokens", "min_completion_tokens"}) {
    j.erase(key);
  }
  j["kv_transfer_params"] = {{"do_remote_decode", true},    {"do_remote_prefill", false},
                             {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                             {"remote_host", nullptr},      {"remote_port", nullptr}};
  return j.dump();
}

std::optional<json> handoff_params(std::string_view prefill_answer) {
  const json j = json::parse(prefill_answer, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return std::nullopt;
  }
  auto it = j.find("kv_transfer_params");
  if (it == j.end() || !it->is_object() || it->empty()) {
    return std::nullopt;
  }
  return *it;
}

std::string decode_body(std::string_view client_body, const json& params) {
  json j = json::parse(client_body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return std::string(client_body);
  }
  j["kv_transfer_params"] = params;
  return j.dump();
}

}  // namespace disagg

asio::awaitable<void> PdPlan::serve(RequestContext& ctx, Dispatcher& d) {
  std::optional<Dispatcher::Step> decode = co_await prefill(ctx, d);
  if (!decode) {
    co_return;
  }
  ctx.role = routing::RoleWanted::kDecode;  // decode and both nodes; ranked by load, then overlap
  served_ = co_await serve_ranked(ctx, d, s_, *decode, /*decode_order=*/true);
}

asio::awaitable<std::optional<Dispatcher::Step>> PdPlan::prefill(RequestContext& ctx, Dispatcher& d) {
  const std::string& model = ctx.model;
  auto body = disagg::prefill_body(ctx.client_body());
  if (!body) {
    co_await answer_error(ctx, s_.metrics, bad_request("The request body must be a JSON object."));
    co_return std::nullopt;
  }
  prefill_body_ = std::move(*body);
  Dispatcher::Step decode;
  decode.role = "decode";

  // The prefill node with the best overlap (the kv score over prefill-capable nodes).
  ctx.role = routing::RoleWanted::kPrefill;
  auto ranked = s_.nodes.rank(ctx.route(), s_.max_attempts, /*decode_order=*/false);
  const std::string why = ranked ? std::string() : std::string(routing::to_string(ranked.error().code));
  if (!ranked || ranked->targets.empty()) {
    s_.metrics.pd_leg(model, "prefill", "no_node");
    if (s_.rc.disaggregation.fallback == "aggregated") {
      CGN_LOG_DEBUG(router_log(), "no prefill node; serving aggregated",
                    log::kv("request_id", ctx.request_id), log::kv("model", model), log::kv("why", why));
      s_.metrics.pd_leg(model, "decode", "fallback");
      co_return decode;
    }
    const ApiError e = service_unavailable("No prefill node can serve model '" + model + "' now (" + why +
                                               ") and [router.disaggregation] fallback is \"reject\".",
                                           "no_prefill_node");
    co_await answer_error(ctx, s_.metrics, e);
    co_return std::nullopt;
  }

  Admission::Slot slot = s_.admission.try_acquire(model, "prefill");
  if (!slot.held()) {
    s_.metrics.admission_rejected(model, "queue_full");
    const ApiError e = too_many_requests(
        "Too many prefill requests in flight for model '" + model + "'; retry later.", "queue_full");
    co_await answer_error(ctx, s_.metrics, e, std::max<uint32_t>(1, s_.admission.retry_after_s()));
    co_return std::nullopt;
  }

  Dispatcher::Step step;
  step.role = "prefill";
  step.body = &prefill_body_;
  step.buffered = true;
  Dispatcher::Outcome out = co_await d.run(ctx, step, ranked->targets);
  switch (out.kind) {
    case Dispatcher::Outcome::Kind::kClientLeft:
      // The server cancelled the pending send (the connection to the prefill node closes, so the
      // node aborts the request), or the client left before an attempt began: no decode leg.
      s_.metrics.pd_leg(model, "prefill", "cancelled");
      CGN_LOG_DEBUG(router_log(), "client left during the prefill leg",
                    log::kv("request_id", ctx.request_id));
      co_return std::nullopt;
    case Dispatcher::Outcome::Kind::kFailed:
      co_return co_await prefill_failed(ctx, d, out, ranked->targets.size());
    case Dispatcher::Outcome::Kind::kDone:
    case Dispatcher::Outcome::Kind::kHeld:
      break;
  }
  const unsigned status = out.answer->result_int();
  if (status != 200) {
    // The node refused the request itself (4xx): a decode node would too. Relay its answer.
    http::Response res = http::make_response(status, out.answer->body(),
                                             std::string((*out.answer)[http::Field::content_type]));
    res.set("X-CGN-Node", out.node);
    res.set("X-Request-Id", ctx.request_id);
    (void)co_await ctx.ex.respond(std::move(res));
    s_.metrics.pd_leg(model, "prefill", "refused");
    s_.metrics.request_done(model, ctx.endpoint, status, seconds_since(ctx.start));
    co_return std::nullopt;
  }
  co_return handoff(ctx, out);
}

asio::awaitable<Dispatcher::Outcome> PdPlan::serve_held(RequestContext& ctx, Dispatcher& d,
                                                        std::chrono::milliseconds budget) {
  const std::string& model = ctx.model;
  const auto began = std::chrono::steady_clock::now();
  // What is left of the budget; nullopt when it is used up (0 stays "no budget").
  const auto left = [&]() -> std::optional<std::chrono::milliseconds> {
    if (budget.count() <= 0) {
      return budget;
    }
    const auto l = budget - std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - began);
    return l.count() > 0 ? std::optional(l) : std::nullopt;
  };
  Dispatcher::Outcome failed;  // kFailed
  auto body = disagg::prefill_body(ctx.client_body());
  if (!body) {
    failed.last_error_text = body.error().message;
    co_return failed;
  }
  prefill_body_ = std::move(*body);
  Dispatcher::Step decode;
  decode.role = "decode";

  ctx.role = routing::RoleWanted::kPrefill;
  auto ranked = s_.nodes.rank(ctx.route(), s_.max_attempts, /*decode_order=*/false);
  const bool fallback = s_.rc.disaggregation.fallback == "aggregated";
  if (!ranked || ranked->targets.empty()) {
    s_.metrics.pd_leg(model, "prefill", "no_node");
    if (!fallback) {
      failed.last_error_text = "no prefill node";
      co_return failed;
    }
    s_.metrics.pd_leg(model, "decode", "fallback");
  } else {
    Dispatcher::Step step;
    step.role = "prefill";
    step.body = &prefill_body_;
    step.buffered = true;
    step.budget = budget;
    Dispatcher::Outcome out = co_await d.run(ctx, step, ranked->targets);
    if (out.kind == Dispatcher::Outcome::Kind::kClientLeft) {
      s_.metrics.pd_leg(model, "prefill", "cancelled");
      co_return out;
    }
    if (out.kind == Dispatcher::Outcome::Kind::kFailed) {
      s_.metrics.pd_leg(model, "prefill", "failed");
      if (out.gave_up || !fallback) {
        co_return out;
      }
      s_.metrics.pd_leg(model, "decode", "fallback");
    } else if (out.answer->result_int() != 200) {
      s_.metrics.pd_leg(model, "prefill", "refused");  // the caller judges the refusal
      co_return out;
    } else {
      decode = handoff(ctx, out);
      prefill_node_ = out.node;
    }
  }
  const auto remaining = left();
  if (!remaining) {
    failed.last_error_text = "the deadline budget ran out after the prefill leg";
    co_return failed;
  }
  decode.buffered = true;
  decode.budget = *remaining;
  ctx.role = routing::RoleWanted::kDecode;
  auto decoders = s_.nodes.rank(ctx.route(), s_.max_attempts, /*decode_order=*/true);
  if (!decoders) {
    failed.last_error_text = "no decode node: " + std::string(routing::to_string(decoders.error().code));
    co_return failed;
  }
  co_return co_await d.run(ctx, decode, decoders->targets);
}

Dispatcher::Step PdPlan::handoff(RequestContext& ctx, const Dispatcher::Outcome& out) {
  Dispatcher::Step decode;
  decode.role = "decode";
  decode.prefill_node = out.node;
  decode.handed_over = std::chrono::steady_clock::now();
  if (auto params = disagg::handoff_params(out.answer->body())) {
    decode_body_ = disagg::decode_body(ctx.client_body(), *params);
    decode.body = &decode_body_;
    s_.metrics.pd_leg(ctx.model, "prefill", "handoff");
    s_.metrics.pd_leg(ctx.model, "decode", "pull");
  } else {
    // A stop token came first (or the node kept no blocks): decode computes the prompt itself.
    s_.metrics.pd_leg(ctx.model, "prefill", "no_params");
    s_.metrics.pd_leg(ctx.model, "decode", "recompute");
  }
  return decode;
}

asio::awaitable<std::optional<Dispatcher::Step>> PdPlan::prefill_failed(RequestContext& ctx, Dispatcher& d,
                                                                        Dispatcher::Outcome& out,
                                                                        size_t targets) {
  s_.metrics.pd_leg(ctx.model, "prefill", "failed");
  // A second node that closed on the request (gave_up) ends it: no fallback either.
  if (!out.gave_up && s_.rc.disaggregation.fallback == "aggregated") {
    CGN_LOG_WARN(router_log(), "every prefill attempt failed; decode recomputes",
                 log::kv("request_id", ctx.request_id), log::kv("model", ctx.model));
    s_.metrics.pd_leg(ctx.model, "decode", "fallback");
    Dispatcher::Step decode;
    decode.role = "decode";
    co_return decode;
  }
  if (out.answer.has_value()) {
    co_await d.answer_failure(ctx, out);
    co_return std::nullopt;
  }
  const std::string what = "All " + std::to_string(targets) + " prefill attempts for model '" + ctx.model +
                           "' failed; last: " + out.last_error_text;
  const ApiError e = out.last_error == http::HttpError::timeout ? gateway_timeout(what) : bad_gateway(what);
  co_await answer_error(ctx, s_.metrics, e);
  co_return std::nullopt;
}

}  // namespace cgn::router
