#include "router/request_intake.h"

#include <fmt/format.h>

#include <charconv>

#include "core/digest.h"
#include "router/carbon/gate.h"
#include "router/coro_warnings.h"
#include "router/responses.h"

namespace cgn::router {

namespace asio = boost::asio;

namespace {

// A refusal as the error of a Result: the ApiError is the code.
Error<ApiError> refusal(ApiError e) {
  std::string message = e.message;
  return Error<ApiError>{std::move(e), std::move(message)};
}

}  // namespace

Result<ClientHeaders, ApiError> parse_client_headers(const http::Request& req) {
  ClientHeaders h;
  if (auto it = req.find("X-CGN-Priority"); it != req.end()) {
    h.priority = std::string(it->value());
    if (h.priority != "low" && h.priority != "normal" && h.priority != "high") {
      return refusal(bad_request("'X-CGN-Priority' must be low, normal or high.", "X-CGN-Priority"));
    }
  }
  if (auto it = req.find("X-CGN-Deadline-Ms"); it != req.end()) {
    std::string_view v = it->value();
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), h.deadline_ms);
    if (ec != std::errc{} || p != v.data() + v.size() || h.deadline_ms <= 0 || h.deadline_ms > 86'400'000) {
      return refusal(bad_request("'X-CGN-Deadline-Ms' must be a whole number of milliseconds in 1..86400000.",
                                 "X-CGN-Deadline-Ms"));
    }
  }
  return h;
}

// The body, parsed and checked; an error for the client otherwise.
Result<ParsedRequest, ApiError> parse_body(const RequestContext& ctx, Endpoint endpoint, GatewayServices& s,
                                           RejectionLog& rejections, std::string* previous_response_id) {
  RequestLimits limits;
  limits.max_body_bytes = s.rc.limits.max_body_bytes;
  limits.max_json_depth = s.rc.limits.max_json_depth;
  limits.max_messages = s.rc.limits.max_messages;
  std::string_view body = ctx.req.body();
  ResponsesRequest responses;
  if (previous_response_id != nullptr) {
    auto translated = translate_responses_request(body, limits);
    if (!translated) {
      return refusal(to_api_error(translated.error()));
    }
    responses = std::move(*translated);
    *previous_response_id = responses.previous_response_id;
    body = responses.chat_body;
    limits.max_body_bytes = std::max(limits.max_body_bytes, body.size());  // the body was within it
  }
  auto parsed = parse_openai_request(endpoint, body, limits);
  if (!parsed) {
    return refusal(to_api_error(parsed.error()));
  }
  if (parsed->has_kv_transfer_params) {
    // Only the router sets them, between a prefill and a decode leg: from a client they would
    // point an engine at a host of the client's choosing and pin KV blocks there.
    rejections.note(reject_reason::kKvTransferParams, ctx.remote);
    return refusal(bad_request(
        "'kv_transfer_params' is set by the router between prefill and decode; a client may not send it.",
        "kv_transfer_params"));
  }
  return std::move(*parsed);
}

std::vector<Digest> prefix_digests(const ParsedRequest& pr, std::string_view model, uint32_t block_bytes) {
  DigestSeedFields fields = digest_seed_fields(pr);
  fields.model = model;
  std::vector<Digest> out;
  compute_prefix_digests(make_digest_seed(fields), pr.canonical_prompt, block_bytes, out, 8192);
  return out;
}

// The routing signal: prefix digests, prompt size, session key.
void set_route(RequestContext& ctx, const ParsedRequest& pr, std::vector<Digest> digests) {
  ctx.digests = std::move(digests);
  ctx.prompt_tokens = static_cast<uint64_t>(static_cast<double>(pr.canonical_prompt.size()) / 4.0);
  ctx.session_key = pr.session_key;
  if (ctx.session_key.empty()) {
    if (auto it = ctx.req.find("X-Session-Id"); it != ctx.req.end()) {
      ctx.session_key = std::string(it->value().substr(0, 256));
    }
  }
}

std::optional<std::pair<ApiError, uint32_t>> carbon_deferral(const RequestContext& ctx,
                                                             const GatewayServices& s) {
  if (s.carbon == nullptr) {
    return std::nullopt;
  }
  const carbon::Gate::Decision d = s.carbon->check(ctx.priority);
  if (d.admit) {
    return std::nullopt;
  }
  const auto& o = s.carbon->options();
  return std::pair{
      too_many_requests(fmt::format("Deferred for carbon: the grid's intensity is {:.0f} gCO2/kWh, above "
                                    "the {:.0f} gCO2/kWh threshold for 'X-CGN-Priority: low' "
                                    "requests; retry after the next reading.",
                                    d.gco2_per_kwh, o.threshold_gco2_per_kwh),
                        "carbon_intensity_high"),
      d.retry_after_s};
}

asio::awaitable<std::optional<Admitted>> admit(http::Exchange& ex, Endpoint endpoint, GatewayServices& s,
                                               RejectionLog& rejections, bool responses_api) {
  const RequestIds ids = request_ids(ex.request());
  const std::string_view label =
      responses_api ? kResponsesEndpoint : std::string_view(endpoint_name(endpoint));
  Admitted a{RequestContext{ex, ex.request(), ids.client, ids.upstream, ex.remote_address(),
                            std::string(kUnknownModel), label, std::chrono::steady_clock::now()},
             Admission::Slot{},
             false,
             {}};
  RequestContext& ctx = a.ctx;
  auto headers = parse_client_headers(ctx.req);
  if (!headers) {
    co_await answer_error(ctx, s.metrics, headers.error().code);
    co_return std::nullopt;
  }
  ctx.priority = std::move(headers->priority);
  ctx.deadline_ms = headers->deadline_ms;
  auto parsed = parse_body(ctx, endpoint, s, rejections, responses_api ? &a.previous_response_id : nullptr);
  if (!parsed) {
    co_await answer_error(ctx, s.metrics, parsed.error().code);
    co_return std::nullopt;
  }
  if (const auto alias = s.rc.cascade.aliases.find(parsed->model); alias != s.rc.cascade.aliases.end()) {
    if (responses_api || endpoint == Endpoint::kEmbeddings) {
      co_await answer_error(
          ctx, s.metrics,
          bad_request("The model '" + alias->first +
                          "' is a cascade, served on /v1/chat/completions and /v1/completions only.",
                      "model", "model_not_supported"));
      co_return std::nullopt;
    }
    ctx.model = alias->first;  // a label value: it is in the configuration
    ctx.stream = parsed->stream;
    // No digests yet: each step has its own (its model seeds them), made once admitted.
    set_route(ctx, *parsed, {});
    if (auto deferred = carbon_deferral(ctx, s); deferred) {
      s.metrics.admission_rejected(ctx.model, "carbon");
      co_await answer_error(ctx, s.metrics, deferred->first, deferred->second);
      co_return std::nullopt;
    }
    a.cascade = &alias->second;
    a.cascade_alias = alias->first;
    a.has_tools = parsed->has_tools;
    for (const config::CascadeStepConfig& step : alias->second.steps) {
      a.cascade_digests.push_back(prefix_digests(*parsed, step.model, s.rc.routing.block_bytes));
    }
    ctx.digests = a.cascade_digests.front();  // the first step's, until the plan routes each step
    co_return std::move(a);
  }
  const NodeTable::ModelInfo info = s.nodes.lookup(parsed->model);
  if (!info.served) {
    co_await answer_error(
        ctx, s.metrics,
        not_found("The model '" + parsed->model.substr(0, 256) + "' does not exist or no node serves it.",
                  "model", "model_not_found"));
    co_return std::nullopt;
  }
  ctx.model = parsed->model;  // a label value now: some node serves it
  ctx.stream = parsed->stream;
  set_route(ctx, *parsed, prefix_digests(*parsed, parsed->model, s.rc.routing.block_bytes));
  a.disaggregated = info.disaggregated && !responses_api;  // a Responses body has no P/D rewrite
  if (auto deferred = carbon_deferral(ctx, s); deferred) {
    s.metrics.admission_rejected(ctx.model, "carbon");
    co_await answer_error(ctx, s.metrics, deferred->first, deferred->second);
    co_return std::nullopt;
  }
  // P/D: this slot is the decode leg's; the prefill leg takes its own (model, prefill) slot.
  a.slot = s.admission.try_acquire(ctx.model, info.disaggregated ? "decode" : "both");
  if (!a.slot.held()) {
    s.metrics.admission_rejected(ctx.model, "queue_full");
    co_await answer_error(
        ctx, s.metrics,
        too_many_requests("Too many requests in flight for model '" + ctx.model + "'; retry later.",
                          "queue_full"),
        std::max<uint32_t>(1, s.admission.retry_after_s()));
    co_return std::nullopt;
  }
  co_return std::move(a);
}

}  // namespace cgn::router
