#include "router/request_intake.h"

#include <charconv>

#include "core/digest.h"
#include "router/coro_warnings.h"

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

namespace {

// The body, parsed and checked; an error for the client otherwise.
Result<ParsedRequest, ApiError> parse_body(const RequestContext& ctx, Endpoint endpoint, GatewayServices& s,
                                           RejectionLog& rejections) {
  RequestLimits limits;
  limits.max_body_bytes = s.rc.limits.max_body_bytes;
  limits.max_json_depth = s.rc.limits.max_json_depth;
  limits.max_messages = s.rc.limits.max_messages;
  auto parsed = parse_openai_request(endpoint, ctx.req.body(), limits);
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

// The routing signal: prefix digests, prompt size, session key.
void set_route(RequestContext& ctx, const ParsedRequest& pr, uint32_t block_bytes) {
  const Digest seed = make_digest_seed(digest_seed_fields(pr));
  compute_prefix_digests(seed, pr.canonical_prompt, block_bytes, ctx.digests, 8192);
  ctx.prompt_tokens = static_cast<uint64_t>(static_cast<double>(pr.canonical_prompt.size()) / 4.0);
  ctx.session_key = pr.session_key;
  if (ctx.session_key.empty()) {
    if (auto it = ctx.req.find("X-Session-Id"); it != ctx.req.end()) {
      ctx.session_key = std::string(it->value().substr(0, 256));
    }
  }
}

}  // namespace

asio::awaitable<std::optional<Admitted>> admit(http::Exchange& ex, Endpoint endpoint, GatewayServices& s,
                                               RejectionLog& rejections) {
  const RequestIds ids = request_ids(ex.request());
  Admitted a{
      RequestContext{ex, ex.request(), ids.client, ids.upstream, ex.remote_address(),
                     std::string(kUnknownModel), endpoint_name(endpoint), std::chrono::steady_clock::now()},
      Admission::Slot{}, false};
  RequestContext& ctx = a.ctx;
  auto headers = parse_client_headers(ctx.req);
  if (!headers) {
    co_await answer_error(ctx, s.metrics, headers.error().code);
    co_return std::nullopt;
  }
  ctx.priority = std::move(headers->priority);
  ctx.deadline_ms = headers->deadline_ms;
  auto parsed = parse_body(ctx, endpoint, s, rejections);
  if (!parsed) {
    co_await answer_error(ctx, s.metrics, parsed.error().code);
    co_return std::nullopt;
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
  set_route(ctx, *parsed, s.rc.routing.block_bytes);
  a.disaggregated = info.disaggregated;
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
