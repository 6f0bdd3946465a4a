#include "agent/agent_proxy.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

#include "agent/loopback_get.h"
#include "core/digest.h"
#include "core/http/proxy_headers.h"
#include "core/log.h"
#include "core/openai_error.h"
#include "core/text.h"
#include "core/tls/grpc_tls.h"

namespace cgn::agent {

namespace asio = boost::asio;
using http::Exchange;
using http::HttpError;
using Clock = std::chrono::steady_clock;

namespace {

// Bounded label values (docs/design/principles.md, metric names): never the raw path.
std::string_view endpoint_label(std::string_view path) {
  if (path == "/v1/chat/completions") {
    return "chat";
  }
  if (path == "/v1/completions") {
    return "completions";
  }
  if (path == "/v1/embeddings") {
    return "embeddings";
  }
  if (path == "/v1/models") {
    return "models";
  }
  return "other";
}

std::optional<int64_t> header_ms(const http::Fields& f, std::string_view name) {
  auto it = f.find(name);
  if (it == f.end()) {
    return std::nullopt;
  }
  std::string_view v = it->value();
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || out <= 0) {
    return std::nullopt;
  }
  return out;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

// --- pure helpers ------------------------------------------------------------------------------

bool request_from_router(const http::Request& req) {
  const std::string_view role = req["X-CGN-Role"];
  return role == "prefill" || role == "decode";
}

Result<std::optional<std::string>, StripError> strip_kv_transfer_params(std::string_view body) {
  // No key can spell kv_transfer_params without these bytes (a \u escape may spell any letter).
  if (body.find("kv_transfer") == std::string_view::npos && body.find("\\u") == std::string_view::npos) {
    return std::optional<std::string>{};
  }
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    // An engine's parser may read what ours does not (Python's json takes NaN): refuse rather
    // than forward a body whose keys we could not see.
    return make_error(StripError::kUnreadable,
                      "the body may name kv_transfer_params but is not a JSON object the agent can read");
  }
  if (j.erase("kv_transfer_params") == 0) {
    return std::optional<std::string>{};
  }
  return std::optional<std::string>{j.dump()};
}

std::optional<std::string> add_cgn_kv_transfer_params(std::string_view body, std::span<const Digest> prefix,
                                                      std::span<const Digest> resident) {
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return std::nullopt;
  }
  const auto hex_list = [](std::span<const Digest> ds) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < ds.size() && i < kMaxKvTransferDigests; ++i) {
      out.push_back(to_hex(ds[i]));
    }
    return out;
  };
  auto& params = j["kv_transfer_params"];
  if (!params.is_object()) {
    params = nlohmann::json::object();
  }
  params["cgn_prefix_digests"] = hex_list(prefix);
  params["cgn_resident_digests"] = hex_list(resident);
  return j.dump();
}

void StreamedReply::add_event(std::string_view data) {
  if (data.empty() || data.front() != '{') {
    return;
  }
  auto j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return;
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) {
    return;
  }
  const auto& choice = (*choices)[0];
  auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) {
    return;
  }
  if (auto c = delta->find("content"); c != delta->end() && c->is_string()) {
    reply_.content += c->get_ref<const std::string&>();
  }
  auto calls = delta->find("tool_calls");
  if (calls == delta->end() || !calls->is_array()) {
    return;
  }
  for (const auto& call : *calls) {
    if (!call.is_object()) {
      continue;
    }
    size_t index = reply_.tool_calls.size();
    if (auto i = call.find("index"); i != call.end() && i->is_number_unsigned()) {
      index = i->get<size_t>();
    }
    if (index > 256) {
      continue;  // the canonical form bounds tool calls per message the same way
    }
    if (index >= reply_.tool_calls.size()) {
      reply_.tool_calls.resize(index + 1);
    }
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) {
      continue;
    }
    if (auto n = fn->find("name"); n != fn->end() && n->is_string()) {
      reply_.tool_calls[index].name += n->get_ref<const std::string&>();
    }
    if (auto a = fn->find("arguments"); a != fn->end() && a->is_string()) {
      reply_.tool_calls[index].arguments += a->get_ref<const std::string&>();
    }
  }
}

bool presents_cluster_token(const http::Request& req, const auth::ClusterToken& token) {
  if (!token.configured()) {
    return true;
  }
  auto it = req.find(auth::kClusterTokenHeader);
  return it != req.end() && token.accepts(std::string_view(it->value().data(), it->value().size()));
}

std::vector<Digest> completion_digests(std::string_view path, std::string_view request_body,
                                       const AssistantReply* reply, uint32_t block_bytes) {
  std::vector<Digest> out;
  Endpoint ep;
  if (path == "/v1/chat/completions") {
    ep = Endpoint::kChat;
  } else if (path == "/v1/completions") {
    ep = Endpoint::kCompletions;
  } else {
    return out;
  }
  if (!valid_block_bytes(block_bytes)) {
    return out;
  }
  auto pr = parse_openai_request(ep, request_body);
  if (!pr) {
    return out;
  }
  std::string canonical = std::move(pr->canonical_prompt);
  if (ep == Endpoint::kChat && reply != nullptr) {
    append_assistant_message(canonical, reply->content, reply->tool_calls);
  }
  pr->canonical_prompt.clear();
  const Digest seed = make_digest_seed(digest_seed_fields(*pr));
  compute_prefix_digests(seed, canonical, block_bytes, out);
  return out;
}

// --- the proxy ---------------------------------------------------------------------------------

struct AgentProxy::Impl {
  AgentProxy* owner;
  AgentProxyOptions options;
  HealthSource health;
  PrefixRecorder recorder;
  log::Logger log = log::get("agent.proxy");
  std::unique_ptr<http::Server> server;
  std::vector<std::unique_ptr<http::HttpClient>> clients;  // one per worker

  metrics::CounterFamily* requests = nullptr;
  metrics::HistogramFamily* duration = nullptr;
  metrics::CounterFamily* upstream_errors = nullptr;
  metrics::Counter chains;
  metrics::Gauge in_flight;  // admitted /v1/ requests not yet answered in full (cgn-ctl drain)

  // One proxied request: what the steps below share.
  struct Call {
    Exchange& ex;
    Clock::time_point start;
    std::string path;
    std::string_view ep;  // endpoint_label(path)
    bool want_digests = false;
  };
  asio::awaitable<void> proxy(Exchange& ex);
  asio::awaitable<bool> admit(Call& c);
  asio::awaitable<std::optional<http::Request>> upstream_request(Call& c);
  http::ClientTimeouts upstream_timeouts(const http::Request& req) const;
  asio::awaitable<void> answer_engine_failure(Call& c, const Error<HttpError>& err);
  asio::awaitable<void> relay_sized(Call& c, http::ClientStream& stream, unsigned status,
                                    http::Fields headers);
  asio::awaitable<void> relay_raw(Call& c, http::ClientStream& stream, unsigned status, http::Fields headers);
  asio::awaitable<void> relay_sse(Call& c, http::ClientStream& stream, unsigned status, http::Fields headers);
  asio::awaitable<void> health_route(Exchange& ex);
  asio::awaitable<void> metrics_route(Exchange& ex);
  void done(std::string_view ep, unsigned code, Clock::time_point start) {
    requests->with({std::string(ep), std::to_string(code)}).inc();
    duration->with({std::string(ep)}).observe(seconds_since(start));
  }
  void record(std::string_view path, std::string_view body, const AssistantReply* reply) {
    auto chain = completion_digests(path, body, reply, options.block_bytes);
    if (!chain.empty()) {
      recorder(chain);
      chains.inc();
      owner->chains_recorded_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Digests run on their own thread, after the answer went out: the worker goes straight back to
  // its connections (the router's next request on the same keep-alive connection does not wait
  // for a JSON parse and the hashing). Bounded: past kMaxPendingDigests queued jobs the worker
  // computes them itself, which slows it down instead of growing memory.
  static constexpr size_t kMaxPendingDigests = 1024;
  std::unique_ptr<asio::thread_pool> digest_pool;
  std::atomic<size_t> digests_pending{0};

  // reply_body: a buffered chat answer, parsed on the digest thread (empty: use `reply`).
  void record_later(std::string path, std::string body, std::string reply_body,
                    std::optional<AssistantReply> reply) {
    auto job = [this, path = std::move(path), body = std::move(body), reply_body = std::move(reply_body),
                reply = std::move(reply)]() mutable {
      if (!reply_body.empty()) {
        if (auto parsed = parse_chat_completion_reply(reply_body)) {
          reply = std::move(*parsed);
        }
      }
      record(path, body, reply ? &*reply : nullptr);
    };
    if (!digest_pool || digests_pending.load(std::memory_order_relaxed) >= kMaxPendingDigests) {
      job();
      return;
    }
    digests_pending.fetch_add(1, std::memory_order_relaxed);
    asio::post(*digest_pool, [this, job = std::move(job)]() mutable {
      job();
      digests_pending.fetch_sub(1, std::memory_order_relaxed);
    });
  }
};

AgentProxy::AgentProxy(AgentProxyOptions options, HealthSource health, PrefixRecorder recorder)
    : impl_(std::make_unique<Impl>()) {
  impl_->owner = this;
  impl_->options = std::move(options);
  impl_->health = std::move(health);
  impl_->recorder = std::move(recorder);
  auto& reg = registry_;
  impl_->requests = &reg.counter("cgn_agent_requests_total",
                                 "Requests the agent proxied, by endpoint and status.", {"endpoint", "code"});
  impl_->duration = &reg.histogram("cgn_agent_request_duration_seconds",
                                   "Time from request to the last byte relayed, by endpoint.", {"endpoint"});
  impl_->upstream_errors =
      &reg.counter("cgn_agent_upstream_errors_total",
                   "Engine requests that failed before an answer, by reason.", {"reason"});
  impl_->in_flight = reg.gauge("cgn_agent_requests_in_flight",
                               "Requests the agent is serving now: admitted, not yet relayed in full "
                               "(any router's; cgn-ctl drain waits for 0).")
                         .with({});
  impl_->chains = reg.counter("cgn_agent_prefix_chains_recorded_total",
                              "Completed requests whose prefix digests entered the published set.")
                      .with({});
}

AgentProxy::~AgentProxy() {
  stop(std::chrono::milliseconds(0));
}

uint16_t AgentProxy::port() const {
  return impl_->server ? impl_->server->port() : 0;
}

http::HttpResult<uint16_t> AgentProxy::start() {
  Impl& im = *impl_;
  http::ServerConfig sc;
  sc.host = im.options.host;
  sc.port = im.options.port;
  sc.threads = std::max<size_t>(1, im.options.threads);
  sc.limits.max_body_bytes = im.options.max_body_bytes;
  tls::apply(im.options.tls, sc);
  http::RouteTable routes;
  routes.get("/health", [&im](Exchange& ex) { return im.health_route(ex); });
  routes.get("/metrics", [&im](Exchange& ex) { return im.metrics_route(ex); });
  routes.set_fallback([&im](Exchange& ex) { return im.proxy(ex); });
  im.server = std::make_unique<http::Server>(sc, std::move(routes));
  http::ClientConfig cc;
  cc.timeouts.connect = im.options.connect_timeout;
  cc.timeouts.idle = im.options.idle_timeout;
  cc.timeouts.header = im.options.request_timeout;
  cc.timeouts.body = im.options.request_timeout;
  for (size_t i = 0; i < im.server->worker_count(); ++i) {
    im.clients.push_back(std::make_unique<http::HttpClient>(im.server->worker_context(i), cc));
  }
  if (im.recorder) {
    im.digest_pool = std::make_unique<asio::thread_pool>(1);
  }
  return im.server->start();
}

void AgentProxy::stop(std::chrono::milliseconds grace) {
  if (impl_ && impl_->server) {
    impl_->server->stop(grace);
  }
  if (impl_ && impl_->digest_pool) {
    impl_->digest_pool->join();  // the queued digests are recorded first
    impl_->digest_pool.reset();
  }
}

asio::awaitable<void> AgentProxy::Impl::health_route(Exchange& ex) {
  const EngineHealth h = health ? health() : EngineHealth{};
  std::string body = R"({"status":")";
  body += h.ready ? "ok" : "unavailable";
  body += R"(","engine":")";
  append_json_escaped(body, h.state);
  body += R"(","node":")";
  append_json_escaped(body, options.node_id);
  body += "\"}";
  co_await ex.respond(http::make_response(h.ready ? 200 : 503, std::move(body)));
}

asio::awaitable<void> AgentProxy::Impl::metrics_route(Exchange& ex) {
  std::string text = owner->registry_.render();
  if (!options.engine_metrics_path.empty()) {
    http::Request r{http::Verb::get, options.engine_metrics_path, 11};
    http::ClientTimeouts t;
    t.connect = options.connect_timeout;
    t.header = std::chrono::milliseconds(2000);
    t.body = std::chrono::milliseconds(2000);
    auto res = co_await clients[ex.worker_index()]->send(options.engine, std::move(r), t);
    if (res && res->result_int() == 200) {
      if (!text.empty() && text.back() != '\n') {
        text += '\n';
      }
      text += res->body();
    }
  }
  co_await ex.respond(http::make_response(200, std::move(text), metrics::Registry::kContentType));
}

asio::awaitable<void> AgentProxy::Impl::proxy(Exchange& ex) {
  Call c{ex, Clock::now(), std::string(http::path_of(ex.request().target()))};
  c.ep = endpoint_label(c.path);
  if (!co_await admit(c)) {
    co_return;
  }
  in_flight.add(1);
  struct InFlight {
    metrics::Gauge& g;
    ~InFlight() { g.add(-1); }
  } in_flight_guard{in_flight};
  http::Request& req = ex.request();
  c.want_digests = static_cast<bool>(recorder) && req.method() == http::Verb::post &&
                   (c.ep == "chat" || c.ep == "completions");
  auto up = co_await upstream_request(c);
  if (!up) {
    co_return;
  }
  auto stream =
      co_await clients[ex.worker_index()]->stream(options.engine, std::move(*up), upstream_timeouts(req));
  if (!ex.client_open()) {
    done(c.ep, 499, c.start);
    co_return;
  }
  if (!stream) {
    co_await answer_engine_failure(c, stream.error());
    co_return;
  }
  const unsigned status = stream->status();
  http::Fields headers;
  http::copy_response_headers(stream->headers(), headers);
  const bool sse = text::istarts_with(stream->headers()[http::Field::content_type], "text/event-stream");
  const bool sized = stream->headers().find(http::Field::content_length) != stream->headers().end();
  if (sse) {
    co_await relay_sse(c, *stream, status, std::move(headers));
  } else if (sized) {
    co_await relay_sized(c, *stream, status, std::move(headers));
  } else {
    co_await relay_raw(c, *stream, status, std::move(headers));
  }
}

// /v1/* only, and only with the cluster's credential: otherwise answers 404 / 401 and returns false.
asio::awaitable<bool> AgentProxy::Impl::admit(Call& c) {
  if (!c.path.starts_with("/v1/")) {
    co_await c.ex.respond_error(
        not_found("Unknown path '" + c.path + "': the agent serves /v1/*, /health and /metrics"));
    done("other", 404, c.start);
    co_return false;
  }
  // A verified client certificate (mutual TLS) stands in for the token.
  const bool cert_verified = options.tls.enabled() && options.tls.require_client_cert;
  if (!cert_verified && !presents_cluster_token(c.ex.request(), options.cluster_token)) {
    co_await c.ex.respond_error(unauthorized(
        "This agent serves the cluster's router only: the request has no valid X-CGN-Cluster-Token. Send "
        "requests to the router."));
    done(c.ep, 401, c.start);
    co_return false;
  }
  co_return true;
}

// The request as the engine gets it; nullopt when it was answered 400 (unreadable body).
asio::awaitable<std::optional<http::Request>> AgentProxy::Impl::upstream_request(Call& c) {
  http::Request& req = c.ex.request();
  // Inference paths go to the engine without a query string; other /v1/ paths keep theirs.
  const bool inference = c.ep == "chat" || c.ep == "completions" || c.ep == "embeddings";
  const std::string_view target = inference ? std::string_view(c.path) : std::string_view(req.target());
  http::Request up{req.method(), target, 11};
  http::copy_forwarded_headers(req, up);  // core/http/proxy_headers.h: the same rules as the router's
  up.erase(auth::kClusterTokenHeader);    // the cluster's credential stays in the cluster
  if (!request_from_router(req)) {
    auto stripped = strip_kv_transfer_params(req.body());
    if (!stripped) {
      co_await c.ex.respond_error(bad_request(stripped.error().message, "kv_transfer_params"));
      done(c.ep, 400, c.start);
      co_return std::nullopt;
    }
    if (stripped->has_value()) {
      CGN_LOG_DEBUG(log, "dropped kv_transfer_params from a request not sent by the router",
                    log::kv("client", c.ex.remote_address()));
      req.body() = std::move(**stripped);
    }
  }
  if (options.kv_hints && req.method() == http::Verb::post && (c.ep == "chat" || c.ep == "completions")) {
    // kv_offload = "cgn": the prompt's digests and what kvcached holds of them, for the engine.
    const KvHints hints = options.kv_hints(c.path, req.body());
    if (!hints.prefix.empty()) {
      if (auto body = add_cgn_kv_transfer_params(req.body(), hints.prefix, hints.resident)) {
        up.body() = std::move(*body);
        up.prepare_payload();
        co_return std::optional<http::Request>(std::move(up));
      }
    }
  }
  // The request body is kept for the digests (computed after the answer); copied only then.
  if (c.want_digests) {
    up.body() = req.body();
  } else {
    up.body() = std::move(req.body());
  }
  up.prepare_payload();
  co_return std::optional<http::Request>(std::move(up));
}

// The configured timeouts, the header and body ones cut to the router's X-CGN-Deadline-Ms.
http::ClientTimeouts AgentProxy::Impl::upstream_timeouts(const http::Request& req) const {
  http::ClientTimeouts t;
  t.connect = options.connect_timeout;
  t.idle = options.idle_timeout;
  t.header = options.request_timeout;
  t.body = options.request_timeout;
  if (auto ms = header_ms(req, "X-CGN-Deadline-Ms")) {
    const auto d = std::chrono::milliseconds(std::min<int64_t>(*ms, options.request_timeout.count()));
    t.header = d;
    t.body = d;
  }
  return t;
}

// The engine gave no answer: 504 (timeout), 502 (closed, or failed while ready) or 503 (not ready).
asio::awaitable<void> AgentProxy::Impl::answer_engine_failure(Call& c, const Error<HttpError>& err) {
  const bool timeout = err.code == HttpError::timeout;
  upstream_errors
      ->with({timeout ? "timeout" : (err.code == HttpError::connect_failed ? "connect" : "closed")})
      .inc();
  const EngineHealth h = health ? health() : EngineHealth{};
  // Closed before answering: the engine may have died of this very request, whatever the
  // supervisor has seen yet; the router must know, so it does not walk the request through
  // the fleet (kFailureHeader).
  const bool closed = !timeout && err.code != HttpError::connect_failed;
  ApiError e = timeout   ? gateway_timeout("The engine timed out: " + err.message)
               : closed  ? bad_gateway("The engine closed the connection before answering: " + err.message)
               : h.ready ? bad_gateway("The engine failed: " + err.message)
                         : service_unavailable("The engine is not ready (" + h.state + "): " + err.message,
                                               "engine_not_ready");
  const unsigned code = e.status;
  http::Response res = http::make_error_response(e);
  if (closed) {
    res.set(http::kFailureHeader, http::kFailureEngineClosed);
  }
  co_await c.ex.respond(std::move(res));
  done(c.ep, code, c.start);
}

// A sized, non-SSE answer: read whole, sent as one response, then digested.
asio::awaitable<void> AgentProxy::Impl::relay_sized(Call& c, http::ClientStream& stream, unsigned status,
                                                    http::Fields headers) {
  Exchange& ex = c.ex;
  auto body = co_await stream.read_all();
  if (!body) {
    upstream_errors->with({"closed"}).inc();
    if (ex.client_open()) {
      http::Response res =
          http::make_error_response(bad_gateway("The engine failed mid-answer: " + body.error().message));
      if (body.error().code != HttpError::timeout) {
        res.set(http::kFailureHeader, http::kFailureEngineClosed);  // nothing of it reached the router
      }
      co_await ex.respond(std::move(res));
    }
    done(c.ep, 502, c.start);
    co_return;
  }
  // The answer goes out first; the reply is parsed for the digests only afterwards.
  const bool digest = c.want_digests && status == 200;
  std::string reply_body;
  if (digest && c.ep == "chat") {
    reply_body = *body;
  }
  http::Response res;
  static_cast<http::Fields&>(res) = std::move(headers);  // built once, not copied again
  res.result(static_cast<http::beast_http::status>(status));
  res.version(11);
  res.body() = std::move(*body);
  res.prepare_payload();
  auto sent = co_await ex.respond(std::move(res));
  done(c.ep, sent.ok() ? status : 499, c.start);
  if (digest && sent.ok()) {
    record_later(c.path, std::move(ex.request().body()), std::move(reply_body), std::nullopt);
  }
}

// Raw streamed body (chunked or until close): relay each piece as it arrives.
asio::awaitable<void> AgentProxy::Impl::relay_raw(Call& c, http::ClientStream& stream, unsigned status,
                                                  http::Fields headers) {
  Exchange& ex = c.ex;
  bool ok = (co_await ex.begin_stream(status, std::move(headers))).ok();
  while (ok) {
    auto piece = co_await stream.read_some();
    if (!piece) {
      ex.abort();
      ok = false;
      break;
    }
    if (piece->empty()) {
      break;
    }
    ok = (co_await ex.write(*piece)).ok();
  }
  if (ok) {
    (void)co_await ex.end_stream();
  }
  done(c.ep, ok ? status : 499, c.start);
}

// SSE: the events of each engine read go out re-serialised as one chunk, flushed at once: the
// status line and headers ride with the first one, the terminating chunk with the last. With a
// real engine the events arrive one decode step apart, so that is one event per write; events
// that arrive together (a burst, the end of the stream) cost one write, not one each.
asio::awaitable<void> AgentProxy::Impl::relay_sse(Call& c, http::ClientStream& stream, unsigned status,
                                                  http::Fields headers) {
  Exchange& ex = c.ex;
  StreamedReply acc;
  const bool accumulate = c.want_digests && status == 200 && c.ep == "chat";
  bool ok = ex.begin_stream_deferred(status, std::move(headers)).ok();
  bool clean_end = false;
  http::SseParser parser;
  std::string out;
  http::SseEvent ev;
  while (ok) {
    auto piece = co_await stream.read_some();
    std::string failure;
    if (!piece) {
      failure = piece.error().message;
    } else if (auto fed = parser.feed(*piece); !fed) {
      failure = "bad SSE stream: " + fed.error().message;
    }
    if (!failure.empty()) {
      if (ex.client_open()) {
        CGN_LOG_WARN(log, "engine failed mid-stream", log::kv("error", failure));
        (void)co_await ex.write({});  // the headers, if nothing went out yet: then the cut
      }
      ex.abort();  // the client sees a truncated stream, never a fake end
      ok = false;
      break;
    }
    out.clear();
    while (parser.pop(ev)) {
      if (accumulate) {
        acc.add_event(ev.data);
      }
      http::append_sse_event(out, ev);
    }
    if (stream.done()) {
      parser.finish();  // a partial event at the end is discarded, as before
      clean_end = true;
      ok = (co_await ex.end_stream(out)).ok();
      break;
    }
    if (!out.empty()) {
      ok = (co_await ex.write(out)).ok();
    }
  }
  done(c.ep, ok ? status : 499, c.start);
  if (ok && clean_end && c.want_digests && status == 200) {
    record_later(c.path, std::move(ex.request().body()), {},
                 accumulate ? std::optional<AssistantReply>(acc.reply()) : std::nullopt);
  }
}

}  // namespace cgn::agent
