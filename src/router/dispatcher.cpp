#include "router/dispatcher.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "core/http/proxy_headers.h"
#include "core/log.h"
#include "core/text.h"
#include "router/coro_warnings.h"
#include "router/responses.h"
#include "router/router_log.h"

namespace cgn::router {

namespace asio = boost::asio;
using http::HttpError;
using http::HttpResult;

namespace {

struct Usage {
  double prompt = 0;
  double completion = 0;
  bool found = false;
};

// `usage` of an OpenAI response or final stream chunk; cheap when the text has none. simdjson
// (one reused parser per thread) rather than nlohmann: every buffered answer passes through here.
Usage parse_usage(std::string_view body) {
  Usage u;
  if (body.find("\"usage\"") == std::string_view::npos) {
    return u;
  }
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object root;
  if (parser.parse(body.data(), body.size()).get(root) != simdjson::SUCCESS) {
    return u;
  }
  simdjson::dom::object usage;
  simdjson::dom::object response;  // /v1/responses: the usage of a response.completed event
  if (root["usage"].get(usage) != simdjson::SUCCESS && (root["response"].get(response) != simdjson::SUCCESS ||
                                                        response["usage"].get(usage) != simdjson::SUCCESS)) {
    return u;
  }
  // get_double() also converts integers; a string or other type is not a count. Responses name
  // them input_tokens / output_tokens.
  if (usage["prompt_tokens"].get_double().get(u.prompt) == simdjson::SUCCESS ||
      usage["input_tokens"].get_double().get(u.prompt) == simdjson::SUCCESS) {
    u.found = true;
  } else {
    u.prompt = 0;
  }
  if (usage["completion_tokens"].get_double().get(u.completion) == simdjson::SUCCESS ||
      usage["output_tokens"].get_double().get(u.completion) == simdjson::SUCCESS) {
    u.found = true;
  } else {
    u.completion = 0;
  }
  return u;
}

// /v1/responses: remembers which node made the response an answer (or event) announces.
void learn_response(ResponseAffinity* affinity, const RequestContext& ctx, const Target& t,
                    std::string_view data) {
  if (affinity == nullptr || ctx.endpoint != kResponsesEndpoint || t.peer()) {
    return;
  }
  if (std::string id = response_id_in(data); !id.empty()) {
    affinity->learn(id, t.node);
  }
}

// An OpenAI-style error body ({"error": {...}}), as engines send; a framework's 404 is not one.
bool is_openai_error(std::string_view body) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object root;
  simdjson::dom::object error;
  return parser.parse(body.data(), body.size()).get(root) == simdjson::SUCCESS &&
         root["error"].get(error) == simdjson::SUCCESS;
}

void set_answer_headers(const RequestContext& ctx, http::Fields& h) {
  for (const auto& [name, value] : ctx.answer_headers) {
    h.set(name, value);
  }
}

http::Fields response_headers(const http::Fields& upstream, const std::string& node,
                              const RequestContext& ctx) {
  http::Fields h;
  http::copy_response_headers(upstream, h, /*drop_cognitora=*/true);
  h.set("X-CGN-Node", node);
  h.set("X-Request-Id", ctx.request_id);
  set_answer_headers(ctx, h);
  return h;
}

}  // namespace

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

http::Request upstream_request(const RequestContext& ctx, const Target& t, std::string_view role,
                               const std::string* body, const auth::ClusterToken& token) {
  const http::Request& in = ctx.req;
  http::Request out{http::Verb::post, t.endpoint.base_path + std::string(http::path_of(in.target())), 11};
  http::copy_client_headers(in, out);
  http::set_forwarded_for(out, ctx.remote);
  out.set("X-Request-Id", ctx.upstream_id);
  out.set("X-CGN-Request-Id", ctx.upstream_id);
  out.set("X-CGN-Role", role);
  if (!ctx.priority.empty()) {
    out.set("X-CGN-Priority", ctx.priority);
  }
  if (t.endpoint.agent && token.configured()) {
    out.set(auth::kClusterTokenHeader, token.presented());
  }
  if (ctx.deadline_ms > 0) {
    out.set("X-CGN-Deadline-Ms", std::to_string(ctx.deadline_ms));
  }
  out.body() = body != nullptr ? *body : std::string(ctx.client_body());
  out.prepare_payload();
  return out;
}

asio::awaitable<void> answer_error(RequestContext& ctx, RouterMetrics& metrics, const ApiError& e,
                                   uint32_t retry_after_s) {
  http::Response res = http::make_error_response(e);
  res.set("X-Request-Id", ctx.request_id);
  set_answer_headers(ctx, res);
  if (retry_after_s > 0) {
    res.set(http::Field::retry_after, std::to_string(retry_after_s));
  }
  (void)co_await ctx.ex.respond(std::move(res));
  metrics.request_done(ctx.model, ctx.endpoint, static_cast<unsigned>(e.status), seconds_since(ctx.start));
}

http::ClientTimeouts Dispatcher::timeouts(const Target& t) const {
  http::ClientTimeouts to;
  to.connect = std::chrono::milliseconds(s_.rc.timeouts.connect_ms);
  to.header = std::chrono::milliseconds(s_.rc.timeouts.first_token_ms);
  to.idle = std::chrono::milliseconds(s_.rc.timeouts.idle_ms);
  to.body = std::chrono::milliseconds(s_.rc.timeouts.request_ms);
  // An agent answers "100 Continue" as soon as it has the headers: one that does not within
  // continue_ms is dead or hung, and the request (its body never sent) goes to the next node.
  if (t.endpoint.agent) {
    to.continue_wait = std::chrono::milliseconds(s_.rc.timeouts.continue_ms);
  }
  return to;
}

Dispatcher::UpstreamCall Dispatcher::upstream_call(const RequestContext& ctx, const Step& step,
                                                   const Target& t) const {
  http::ClientTimeouts to = timeouts(t);
  if (step.budget.count() > 0) {
    to.header = std::min(to.header, step.budget);
    to.body = std::min(to.body, step.budget);
  }
  return UpstreamCall{http::Upstream{t.endpoint.host, t.endpoint.port, t.endpoint.tls},
                      upstream_request(ctx, t, step.role, step.body, s_.cluster_token), to};
}

void Dispatcher::note_failure(RequestContext& ctx, const Target& t, AttemptFailure f, bool more,
                              Outcome& out) {
  if (!ctx.retries.allows_retry_after(f)) {
    out.gave_up = true;
    CGN_LOG_WARN(router_log(),
                 "a second node closed the connection on this request before answering; not retried",
                 log::kv("request_id", ctx.request_id), log::kv("node", t.node), log::kv("model", ctx.model));
  } else if (more) {
    s_.metrics.retry(ctx.model, reason_label(f));
    CGN_LOG_DEBUG(router_log(), "retrying on the next node", log::kv("request_id", ctx.request_id),
                  log::kv("node", t.node), log::kv("reason", reason_label(f)));
  }
}

void Dispatcher::note_error(RequestContext& ctx, const Target& t, const Error<HttpError>& err, bool more,
                            Outcome& out) {
  out.last_error = err.code;
  out.last_error_text = t.node + ": " + err.message;
  if (err.code == HttpError::connect_failed && !t.peer()) {
    s_.nodes.mark_refused(t.node);  // passive health
  }
  note_failure(ctx, t, failure_of(err.code), more, out);
}

asio::awaitable<Dispatcher::Outcome> Dispatcher::run(RequestContext& ctx, const Step& step,
                                                     const std::vector<Target>& targets) {
  Outcome out;
  for (size_t i = 0; i < targets.size() && !out.gave_up; ++i) {
    if (!ctx.ex.client_open()) {
      // A cancellation emitted between two awaits is not seen by the next send: check first.
      out.kind = Outcome::Kind::kClientLeft;
      break;
    }
    ++out.tried;
    const bool more = i + 1 < targets.size();
    // No co_await inside a conditional expression: GCC 12 mis-handles temporaries there.
    Next next = Next::kRetry;
    if (step.buffered) {
      next = co_await attempt_buffered(ctx, step, targets[i], more, out);
    } else {
      next = co_await attempt_relayed(ctx, step, targets[i], more, out);
    }
    if (next == Next::kRetry) {
      continue;
    }
    out.kind = next == Next::kDone   ? Outcome::Kind::kDone
               : next == Next::kHeld ? Outcome::Kind::kHeld
                                     : Outcome::Kind::kClientLeft;
    break;
  }
  if (out.kind == Outcome::Kind::kClientLeft) {
    s_.metrics.request_done(ctx.model, ctx.endpoint, kClientClosed, seconds_since(ctx.start));
  }
  co_return out;
}

asio::awaitable<Dispatcher::Next> Dispatcher::attempt_buffered(RequestContext& ctx, const Step& step,
                                                               const Target& t, bool more, Outcome& out) {
  routing::DispatchTicket ticket = s_.nodes.dispatch(t, ctx.route());
  UpstreamCall call = upstream_call(ctx, step, t);
  auto res = co_await client_.send(call.up, std::move(call.req), call.to);
  s_.nodes.finish(ticket, res.ok());
  if (!ctx.ex.client_open()) {
    co_return Next::kClientLeft;
  }
  if (!res) {
    note_error(ctx, t, res.error(), more, out);
    CGN_LOG_DEBUG(router_log(), "attempt failed", log::kv("request_id", ctx.request_id),
                  log::kv("node", t.node), log::kv("role", step.role), log::kv("error", res.error().message));
    co_return Next::kRetry;
  }
  const unsigned status = res->result_int();
  if (status == 429 || status >= 500) {
    const AttemptFailure f = failure_of_answer(status, *res);
    out.answer = http::make_response(status, res->body(), std::string((*res)[http::Field::content_type]));
    out.node = t.node;
    note_failure(ctx, t, f, more, out);
    co_return Next::kRetry;
  }
  out.answer = std::move(*res);
  out.node = t.node;
  co_return Next::kHeld;
}

asio::awaitable<Dispatcher::Next> Dispatcher::attempt_relayed(RequestContext& ctx, const Step& step,
                                                              const Target& t, bool more, Outcome& out) {
  routing::DispatchTicket ticket = s_.nodes.dispatch(t, ctx.route());
  UpstreamCall call = upstream_call(ctx, step, t);
  auto stream = co_await client_.stream(call.up, std::move(call.req), call.to);
  if (!ctx.ex.client_open()) {
    s_.nodes.complete(ticket);
    co_return Next::kClientLeft;
  }
  if (!stream) {
    s_.nodes.complete(ticket);
    note_error(ctx, t, stream.error(), more, out);
    co_return Next::kRetry;
  }
  const unsigned status = stream->status();
  if (status == 429 || status >= 500) {
    auto body = co_await stream->read_all();
    s_.nodes.complete(ticket);
    http::Response r{static_cast<http::beast_http::status>(status), 11};
    http::copy_response_headers(stream->headers(), r, /*drop_cognitora=*/true);
    r.body() = body.ok() ? std::move(*body) : std::string();
    out.answer = std::move(r);
    out.node = t.node;
    note_failure(ctx, t, failure_of_answer(status, stream->headers()), more, out);
    co_return Next::kRetry;
  }
  if (status == 404 && ctx.endpoint == kResponsesEndpoint) {
    auto body = co_await stream->read_all();
    s_.nodes.complete(ticket);
    if (!body.ok() || !is_openai_error(*body)) {
      // The engine has no /v1/responses (a framework 404, not an OpenAI error): the next node may.
      out.answer =
          http::make_error_response(bad_request("The engines serving model '" + ctx.model +
                                                    "' do not serve /v1/responses; use /v1/chat/completions.",
                                                "", "endpoint_not_supported"));
      out.node = t.node;
      co_return Next::kRetry;
    }
    http::Response r{http::beast_http::status::not_found, 11};
    static_cast<http::Fields&>(r) = response_headers(stream->headers(), t.node, ctx);
    r.body() = std::move(*body);
    r.prepare_payload();
    (void)co_await ctx.ex.respond(std::move(r));
    s_.metrics.request_done(ctx.model, ctx.endpoint, status, seconds_since(ctx.start));
    co_return Next::kDone;
  }
  const bool sse = text::istarts_with(stream->headers()[http::Field::content_type], "text/event-stream");
  http::Fields headers = response_headers(stream->headers(), t.node, ctx);
  if (!step.prefill_node.empty()) {
    headers.set("X-CGN-Prefill-Node", step.prefill_node);
    s_.metrics.pd_handoff(seconds_since(step.handed_over));
  }
  Error<HttpError> err;
  Next next = Next::kDone;
  if (!sse && !ctx.stream) {
    next = co_await relay_buffered(ctx, t, *stream, ticket, std::move(headers), err);
  } else if (!sse) {
    next = co_await relay_raw(ctx, *stream, ticket, std::move(headers), err);
  } else {
    next = co_await relay_sse(ctx, t, *stream, ticket, std::move(headers), err);
  }
  if (next == Next::kRetry) {
    // The body failed before its first byte reached the client.
    s_.nodes.complete(ticket);
    if (!ctx.ex.client_open()) {
      co_return Next::kClientLeft;
    }
    out.last_error = err.code;
    out.last_error_text = t.node + ": " + err.message;
    note_failure(ctx, t, failure_of(err.code), more, out);
  }
  co_return next;
}

asio::awaitable<Dispatcher::Next> Dispatcher::relay_buffered(RequestContext& ctx, const Target& t,
                                                             http::ClientStream& stream,
                                                             routing::DispatchTicket& ticket,
                                                             http::Fields headers, Error<HttpError>& err) {
  // The whole body first, so a failure here can still move to the next node.
  auto body = co_await stream.read_all();
  if (!body) {
    err = body.error();
    co_return Next::kRetry;
  }
  const unsigned status = stream.status();
  learn_response(s_.responses, ctx, t, *body);
  const Usage usage = parse_usage(*body);
  http::Response res;
  static_cast<http::Fields&>(res) = std::move(headers);  // the fields built once, not copied again
  res.result(static_cast<http::beast_http::status>(status));
  res.version(11);
  res.body() = std::move(*body);
  res.prepare_payload();
  // The node is done once its whole answer is here: release its in-flight accounting before the
  // client sees the answer, or the client's next request is routed as if this one still ran
  // there (and a stale guess elsewhere can win over a confirmed prefix).
  s_.nodes.finish(ticket, /*answered=*/true);
  (void)co_await ctx.ex.respond(std::move(res));
  s_.metrics.tokens(ctx.model, usage.prompt, usage.completion, t.node);
  s_.metrics.request_done(ctx.model, ctx.endpoint, status, seconds_since(ctx.start));
  co_return Next::kDone;
}

asio::awaitable<Dispatcher::Next> Dispatcher::relay_raw(RequestContext& ctx, http::ClientStream& stream,
                                                        routing::DispatchTicket& ticket, http::Fields headers,
                                                        Error<HttpError>& err) {
  // A streamed body that is not SSE: raw pieces, each flushed as it arrives.
  const unsigned status = stream.status();  // from the head, already read
  auto first = co_await stream.read_some();
  if (!first) {
    err = first.error();
    co_return Next::kRetry;
  }
  std::string piece(*first);
  (void)co_await ctx.ex.begin_stream(status, std::move(headers));
  bool ok = true;
  while (!piece.empty() && ok) {
    ok = (co_await ctx.ex.write(piece)).ok();
    if (!ok) {
      break;
    }
    auto next = co_await stream.read_some();
    if (!next) {
      ok = false;
      ctx.ex.abort();
      break;
    }
    piece.assign(*next);
  }
  if (ok) {
    (void)co_await ctx.ex.end_stream();
  }
  s_.nodes.complete(ticket);
  s_.metrics.request_done(ctx.model, ctx.endpoint, ctx.ex.client_open() ? status : kClientClosed,
                          seconds_since(ctx.start));
  co_return Next::kDone;
}

namespace {

// Ends a stream whose node failed after tokens reached the client (no retry then): an error event
// and [DONE], so the client's parser finishes cleanly.
asio::awaitable<void> end_with_error(http::Exchange& ex, const std::string& node, const Error<HttpError>& e) {
  ApiError api = e.code == HttpError::timeout
                     ? gateway_timeout("The node '" + node + "' timed out mid-stream: " + e.message)
                     : bad_gateway("The node '" + node + "' failed mid-stream: " + e.message);
  http::SseEvent err;
  err.data = api.body();
  (void)co_await ex.write_event(err);
  http::SseEvent done;
  done.data = "[DONE]";
  (void)co_await ex.write_event(done);
}

}  // namespace

asio::awaitable<Dispatcher::Next> Dispatcher::relay_sse(RequestContext& ctx, const Target& t,
                                                        http::ClientStream& stream,
                                                        routing::DispatchTicket& ticket, http::Fields headers,
                                                        Error<HttpError>& err) {
  // Wait for the first event before answering, so a node that dies first is retried.
  auto first = co_await stream.next_event();
  if (!first) {
    err = first.error();
    co_return Next::kRetry;
  }
  const unsigned status = stream.status();
  const int64_t request_ms = s_.rc.timeouts.request_ms;
  auto begun = co_await ctx.ex.begin_stream(status, std::move(headers));
  std::optional<http::SseEvent> event = std::move(*first);
  bool first_token = false;
  Usage usage;
  bool client_ok = begun.ok();
  while (client_ok && event.has_value()) {
    if (!first_token && !event->is_done()) {
      first_token = true;
      s_.metrics.ttft(seconds_since(ctx.start));
      s_.nodes.first_token(ticket);
    }
    if (!event->is_done()) {
      if (const Usage u = parse_usage(event->data); u.found) {
        usage = u;
      }
      learn_response(s_.responses, ctx, t, event->data);
    }
    client_ok = (co_await ctx.ex.write_event(*event)).ok();
    if (!client_ok) {
      break;
    }
    // request_ms bounds the whole request; checked between events (a silent node is bounded by
    // idle_ms), so a stream lasts at most request_ms + idle_ms.
    const bool over_budget =
        !event->is_done() && seconds_since(ctx.start) * 1000.0 > static_cast<double>(request_ms);
    // No co_await inside a conditional expression: GCC 12 mis-handles temporaries there.
    HttpResult<std::optional<http::SseEvent>> next = std::optional<http::SseEvent>{};
    if (over_budget) {
      next = http::http_error(HttpError::timeout,
                              "the request exceeded request_ms (" + std::to_string(request_ms) + " ms)");
    } else {
      next = co_await stream.next_event();
    }
    if (!next) {
      if (!ctx.ex.client_open()) {
        client_ok = false;
        break;
      }
      CGN_LOG_WARN(router_log(), "upstream failed mid-stream", log::kv("request_id", ctx.request_id),
                   log::kv("node", t.node), log::kv("error", next.error().message));
      co_await end_with_error(ctx.ex, t.node, next.error());
      break;
    }
    event = std::move(*next);
  }
  if (client_ok) {
    (void)co_await ctx.ex.end_stream();
  }
  s_.nodes.complete(ticket);
  s_.metrics.tokens(ctx.model, usage.prompt, usage.completion, t.node);
  s_.metrics.request_done(ctx.model, ctx.endpoint, client_ok && ctx.ex.client_open() ? status : kClientClosed,
                          seconds_since(ctx.start));
  co_return Next::kDone;
}

asio::awaitable<void> Dispatcher::answer_failure(RequestContext& ctx, Outcome& out) {
  if (out.answer.has_value()) {
    http::Response res = std::move(*out.answer);
    res.set("X-CGN-Node", out.node);
    res.set("X-Request-Id", ctx.request_id);
    set_answer_headers(ctx, res);
    res.prepare_payload();
    const unsigned status = res.result_int();
    (void)co_await ctx.ex.respond(std::move(res));
    s_.metrics.request_done(ctx.model, ctx.endpoint, status, seconds_since(ctx.start));
    co_return;
  }
  const std::string what =
      out.gave_up ? fmt::format(
                        "Two nodes closed the connection on this request before answering; it is not "
                        "retried further (it may crash the engine). Last: {}",
                        out.last_error_text)
                  : fmt::format("All {} attempts for model '{}' failed; last: {}", out.tried, ctx.model,
                                out.last_error_text);
  const ApiError error = out.last_error == HttpError::timeout ? gateway_timeout(what) : bad_gateway(what);
  co_await answer_error(ctx, s_.metrics, error);
}

}  // namespace cgn::router
