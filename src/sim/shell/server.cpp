#include "sim/shell/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <random>
#include <unordered_map>

#include "core/http/client.h"
#include "core/http/server.h"
#include "core/log.h"
#include "sim/metrics_render.h"
#include "sim/openai_parse.h"
#include "sim/openai_render.h"
#include "sim/power_page.h"
#include "sim/responses_api.h"
#include "sim/shell/kv_event_publisher.h"
#include "sim/shell/kvcached_tier.h"
#include "sim/shell_api.h"

// GCC 12 at -O1 with sanitizers reports -Wmismatched-new-delete on some Asio
// coroutine frames: it sees the frame freed by awaitable_frame_base's
// operator delete but not the matching operator new (Asio's recycling
// allocator). A false positive; the pair is matched by construction.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace cgn::sim {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

namespace {

// One request's mailbox: the engine timer pushes its events and cancels the
// wake-up timer; the handler coroutine drains the queue and waits on it.
struct Waiter {
  explicit Waiter(const asio::any_io_executor& ex) : wake(ex, steady_clock::time_point::max()) {}
  std::deque<Event> events;
  asio::steady_timer wake;
};

std::string_view header(const http::Request& req, std::string_view name) {
  auto it = req.find(name);
  return it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

void add_headers(http::Response& res, const std::vector<std::pair<std::string, std::string>>& hs) {
  for (const auto& [k, v] : hs) {
    res.set(k, v);
  }
}

// Binds host:port without listening: connects are refused until we listen.
int reserve_port(const std::string& host, uint16_t port, uint16_t& bound, std::string& err) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, h.c_str(), &addr.sin_addr) != 1) {
    err = "--host must be an IPv4 address, got '" + host + "'";
    return -1;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = "socket() failed";
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    err = "cannot bind " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  bound = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

struct SimServer::Impl {
  Impl(const ShellConfig& cfg, EngineConfig ecfg)
      : shell(cfg),
        flavour(cfg.sim.flavour),
        engine(std::move(ecfg)),
        epoch(steady_clock::now()),
        load_end(static_cast<Nanos>(cfg.sim.load_seconds * 1e9)),
        created_unix(std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count()),
        logger(log::get("sim")) {
    mctx.model_name = cfg.sim.served_model_name;
    mctx.engine_index = cfg.sim.engine_index;
    mctx.created_unix = static_cast<double>(created_unix);
    mctx.deprecated_names = cfg.sim.deprecated_metrics;
  }

  // ---- engine driving (worker thread only) ----------------------------------

  Nanos now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(steady_clock::now() - epoch).count();
  }
  bool loaded() const { return now() >= load_end; }

  // Runs the engine up to now, delivers its events, re-arms the timer.
  // Re-entrant: a dispatch may complete a KV pull inline and pump again; the
  // inner call only asks the outer loop for another round.
  void pump() {
    if (shutting_down) {
      return;
    }
    if (pumping) {
      repump = true;
      return;
    }
    pumping = true;
    do {
      repump = false;
      engine.advance_to(now());
      std::vector<Event> events;
      events.swap(scratch);  // reuse the capacity
      engine.take_events(events);
      for (Event& ev : events) {
        dispatch(std::move(ev));
      }
      events.clear();
      scratch.swap(events);
    } while (repump);
    pumping = false;
    publish_kv_events();
    arm();
  }

  // Hands the KV cache events recorded since the last call to the ZMQ thread (one EventBatch).
  void publish_kv_events() {
    if (!kv_pub) {
      return;
    }
    std::vector<KvCacheEvent> evs;
    engine.take_kv_events(evs);
    if (!evs.empty()) {
      const double ts =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      kv_pub->publish(std::move(evs), ts);
    }
  }

  void arm() {
    const Nanos t = engine.next_event_time();
    if (t == kNever) {
      if (armed != kNever) {
        armed = kNever;
        tick->cancel();  // idle: no timer, no CPU
      }
      return;
    }
    if (t == armed) {
      return;
    }
    armed = t;
    tick->expires_at(epoch + std::chrono::nanoseconds(t));
    tick->async_wait([this, t](error_code ec) {
      if (ec || armed != t) {
        return;  // re-armed or cancelled meanwhile
      }
      armed = kNever;
      pump();
    });
  }

  void dispatch(Event&& ev) {
    if (ev.kind == EventKind::kKvPull) {
      asio::co_spawn(server->worker_context(0), pull_kv(ev.handle, std::move(*ev.pull)), asio::detached);
      return;
    }
    auto it = waiters.find(ev.handle);
    if (it == waiters.end()) {
      return;  // the exchange went away (aborted)
    }
    it->second->events.push_back(std::move(ev));
    it->second->wake.cancel();
  }

  // P/D decode side: claim the blocks from the prefill instance's side channel.
  asio::awaitable<void> pull_kv(RequestHandle h, KvPull p) {
    ClaimStatus st = ClaimStatus::kUnknown;
    if (p.remote_port > 0 && p.remote_port <= 65535) {
      http::Upstream up{p.remote_host == "localhost" ? "127.0.0.1" : p.remote_host,
                        static_cast<uint16_t>(p.remote_port), false};
      http::Request req{http::Verb::post, std::string(kClaimPath), 11};
      req.set(http::Field::content_type, "application/json");
      req.body() = render_claim_body({p.remote_engine_id, p.remote_request_id, p.remote_block_ids});
      http::ClientTimeouts t;
      t.connect = std::chrono::milliseconds(2'000);
      t.header = std::chrono::milliseconds(5'000);
      t.body = std::chrono::milliseconds(5'000);
      if (!client) {
        make_client();
      }
      auto res = co_await client->send(up, std::move(req), t);
      if (res && res->result_int() == 200) {
        st = parse_claim_answer(res->body());
      } else {
        CGN_LOG_WARN(logger, "kv claim failed; recomputing", log::kv("remote", up.key()),
                     log::kv("error", res ? std::to_string(res->result_int()) : res.error().message));
      }
    }
    if (shutting_down) {
      co_return;
    }
    engine.complete_kv_pull(h, st, now());
    pump();
  }

  // The side-channel client. Its TLS context initialises OpenSSL (~4 MB
  // resident), so instances that never pull build it on first use.
  void make_client() {
    http::ClientConfig cc;
    cc.tls_verify = false;  // plain HTTP on loopback; no CA bundle to load
    client = std::make_unique<http::HttpClient>(server->worker_context(0), cc);
  }

  // Waits for the request's next event; nullopt when the client went away.
  asio::awaitable<std::optional<Event>> next_event(Waiter& w, http::Exchange& ex) {
    while (w.events.empty()) {
      if (!ex.client_open()) {
        co_return std::nullopt;
      }
      (void)co_await w.wake.async_wait(use_tuple);
    }
    Event e = std::move(w.events.front());
    w.events.pop_front();
    co_return e;
  }

  // Removes the mailbox and aborts the engine request unless it finished.
  struct Registration {
    Impl& impl;
    RequestHandle handle;
    bool finished = false;
    ~Registration() {
      impl.waiters.erase(handle);
      if (!finished && !impl.shutting_down) {
        impl.engine.abort(handle, impl.now());
        impl.pump();
      }
    }
  };

  // ---- responses -------------------------------------------------------------

  http::Response error_response(int status, std::string_view message, std::string_view param = {}) const {
    return http::make_response(static_cast<unsigned>(status),
                               render_error_body(flavour, status, message, param), "application/json");
  }

  http::Response loading_response() const {
    const HealthAnswer a = health_answer(flavour, false);
    return http::make_response(static_cast<unsigned>(a.status), std::string(a.body), a.content_type);
  }

  static asio::awaitable<bool> wait_real(std::chrono::nanoseconds d, http::Exchange& ex) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    (void)co_await t.async_wait(use_tuple);
    co_return ex.client_open();
  }

  std::string request_id(const http::Request& req) {
    std::string_view given = header(req, "X-Request-Id");
    if (!given.empty() && given.size() <= 256) {
      return std::string(given);
    }
    return "sim-" + std::to_string(port) + "-" + std::to_string(++next_id);
  }

  // The fault plan of one request: the flag plan (maybe for a fraction of requests), overridden by
  // a matching rule, overridden by the header. An unparsable header: its error.
  Result<FaultPlan, FaultError> request_faults(const http::Request& hreq, const std::string& rid) const {
    FaultPlan plan = fault_applies(shell.sim.faults, rid) ? shell.sim.faults : FaultPlan{};
    if (const FaultPlan* rule = shell.fault_rules.match(rid, hreq.body())) {
      plan = merge_faults(plan, *rule);
    }
    if (std::string_view spec = header(hreq, kFaultHeader); !spec.empty()) {
      auto hp = parse_fault_spec(spec, /*from_header=*/true);
      if (!hp) {
        return hp.error();
      }
      plan = merge_faults(plan, *hp);
    }
    return plan;
  }

  // What one generation request's reply needs besides the engine's events.
  struct Reply {
    std::string rid;
    FaultPlan plan;
    ResponseMeta meta;
    bool decode_leg = false;  // a P/D decode leg: says how its KV pull went
  };

  std::vector<std::pair<std::string, std::string>> finished_headers(const Reply& rp,
                                                                    const Completion& c) const {
    auto hs = timing_headers(c);
    hs.emplace_back("X-Request-Id", rp.rid);
    if (rp.decode_leg) {
      hs.emplace_back("X-Sim-Kv-Pull",
                      c.kv_pull_failed ? "failed" : (c.transferred_tokens > 0 ? "ok" : "none"));
    }
    return hs;
  }

  http::Response failed_response(const Reply& rp, const Completion& c) const {
    const int status = c.error_status > 0 ? c.error_status : 500;
    http::Response res = error_response(status, "Simulated engine failure (fault injection).");
    add_headers(res, finished_headers(rp, c));
    return res;
  }

  // What every generation request does first: the loading answer, its id and fault plan (exit and
  // slow start applied). nullopt when it has been answered (or the client left).
  asio::awaitable<std::optional<Reply>> begin_reply(http::Exchange& ex) {
    if (!loaded()) {
      (void)co_await ex.respond(loading_response());
      co_return std::nullopt;
    }
    const http::Request& hreq = ex.request();
    Reply rp;
    rp.rid = request_id(hreq);
    auto plan = request_faults(hreq, rp.rid);
    if (!plan) {
      (void)co_await ex.respond(error_response(400, "X-Sim-Fault: " + plan.error().message));
      co_return std::nullopt;
    }
    rp.plan = *plan;
    if (rp.plan.exit_process) {
      CGN_LOG_WARN(logger, "fault: exiting", log::kv("request_id", rp.rid));
      std::_Exit(1);
    }
    if (rp.plan.slow_start > 0 && !co_await wait_real(std::chrono::nanoseconds(rp.plan.slow_start), ex)) {
      co_return std::nullopt;
    }
    co_return rp;
  }

  asio::awaitable<void> generate(http::Exchange& ex, ApiKind kind) {
    auto begun = co_await begin_reply(ex);
    if (!begun) {
      co_return;
    }
    Reply& rp = *begun;
    const http::Request& hreq = ex.request();
    auto body = parse_generation_body(kind, hreq.body());
    if (!body) {
      (void)co_await ex.respond(error_response(400, body.error().message));
      co_return;
    }
    if (flavour == Flavour::kVllm && !body->model.empty() && body->model != shell.sim.served_model_name) {
      (void)co_await ex.respond(
          error_response(404, "The model `" + body->model.substr(0, 256) + "` does not exist.", "model"));
      co_return;
    }
    Request r = to_engine_request(*body, shell.sim.reply_mode, engine.config().model.max_model_len);
    rp.meta.tool_calls = plan_tool_calls(body->structured, body->messages, rp.rid);
    rp.meta.logprobs = body->logprobs;
    rp.meta.logprobs.confidence = rp.plan.confidence > 0 ? rp.plan.confidence : kDefaultConfidence;
    rp.meta.logprobs.seed = request_seed(rp.rid) ^ 0x6c6f67ULL;
    if (!rp.meta.tool_calls.empty()) {
      set_fixed_reply(r, tool_calls_reply_text(rp.meta.tool_calls));
    }
    r.external_id = rp.rid;
    r.fail_before_first_token = rp.plan.error_status;
    rp.decode_leg = r.kv_transfer && r.kv_transfer->do_remote_prefill;

    Waiter w(co_await asio::this_coro::executor);
    auto h = engine.add_request(std::move(r), now());
    if (!h) {
      (void)co_await ex.respond(error_response(http_status(h.error().code), h.error().message));
      co_return;
    }
    waiters.emplace(*h, &w);
    Registration reg{*this, *h};
    pump();

    rp.meta.kind = kind;
    rp.meta.id = (kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-") + rp.rid;
    rp.meta.created = created_unix + (now() / kNanosPerSecond);
    rp.meta.model = shell.sim.served_model_name;
    if (!body->stream) {
      co_await reply_whole(ex, w, reg, rp,
                           [&rp](const Completion& c) { return render_completion_body(rp.meta, c); });
    } else {
      co_await reply_stream(ex, w, reg, rp, SseStream(rp.meta, body->include_usage));
    }
  }

  // POST /v1/responses (vLLM; responses_api.h): the conversation (with previous_response_id's
  // stored one) generated as a chat request; a stored response is kept in `stored_responses`.
  asio::awaitable<void> responses(http::Exchange& ex) {
    auto begun = co_await begin_reply(ex);
    if (!begun) {
      co_return;
    }
    Reply& rp = *begun;
    auto body = parse_responses_body(ex.request().body());
    if (!body) {
      (void)co_await ex.respond(error_response(400, body.error().message));
      co_return;
    }
    if (!body->model.empty() && body->model != shell.sim.served_model_name) {
      (void)co_await ex.respond(
          error_response(404, "The model `" + body->model.substr(0, 256) + "` does not exist.", "model"));
      co_return;
    }
    const StoredResponse* previous = nullptr;
    if (!body->previous_response_id.empty()) {
      previous = stored_responses.find(body->previous_response_id);
      if (previous == nullptr) {
        (void)co_await ex.respond(http::make_response(
            404,
            render_error_body(flavour, 404, response_not_found_message(body->previous_response_id), {},
                              "invalid_request_error"),
            "application/json"));
        co_return;
      }
    }
    if (body->has_tools) {
      (void)co_await ex.respond(error_response(400, kResponsesToolsError));
      co_return;
    }
    GenerationBody chat;
    chat.model = body->model;
    chat.messages = responses_conversation(*body, previous);
    chat.max_tokens = body->max_output_tokens;
    chat.stream = body->stream;
    chat.seed = body->seed;
    Request r = to_engine_request(chat, shell.sim.reply_mode, engine.config().model.max_model_len);
    r.external_id = rp.rid;
    r.fail_before_first_token = rp.plan.error_status;

    ResponseObjectMeta meta;
    meta.id = "resp_" + hex_id(id_salt, ++next_response);
    meta.message_id = "msg_" + hex_id(id_salt, ++next_response);
    meta.created_at = created_unix + (now() / kNanosPerSecond);
    meta.model = shell.sim.served_model_name;
    meta.instructions = body->instructions;
    meta.previous_response_id = body->previous_response_id;
    meta.max_output_tokens = r.max_tokens;
    meta.temperature = body->temperature;
    meta.top_p = body->top_p;

    Waiter w(co_await asio::this_coro::executor);
    auto h = engine.add_request(std::move(r), now());
    if (!h) {
      (void)co_await ex.respond(error_response(http_status(h.error().code), h.error().message));
      co_return;
    }
    waiters.emplace(*h, &w);
    Registration reg{*this, *h};
    pump();

    // Kept when the request finished (vLLM stores only completed responses, and only with store).
    auto keep = [this, store = body->store, id = meta.id,
                 msgs = std::move(chat.messages)](const Completion& c) {
      if (store) {
        stored_responses.put(id, StoredResponse{msgs, c.text});
      }
    };
    if (!body->stream) {
      co_await reply_whole(ex, w, reg, rp, [&meta, &keep](const Completion& c) {
        keep(c);
        return render_response_object(meta, &c);
      });
    } else {
      std::string item_id = hex_id(id_salt, ++next_response);
      co_await reply_stream(ex, w, reg, rp, ResponsesSse(meta, std::move(item_id), keep));
    }
  }

  // Non-streaming: one response once the request finished, its body render(completion).
  template <typename Render>
  asio::awaitable<void> reply_whole(http::Exchange& ex, Waiter& w, Registration& reg, const Reply& rp,
                                    Render render) {
    for (;;) {
      auto ev = co_await next_event(w, ex);
      if (!ev) {
        co_return;  // client gone: the registration aborts the request
      }
      if (ev->kind != EventKind::kFinished) {
        continue;
      }
      reg.finished = true;
      const Completion& c = *ev->completion;
      if (c.reason == FinishReason::kError) {
        (void)co_await ex.respond(failed_response(rp, c));
        co_return;
      }
      http::Response res = http::make_response(200, render(c), "application/json");
      add_headers(res, finished_headers(rp, c));
      (void)co_await ex.respond(std::move(res));
      co_return;
    }
  }

  // The SSE status and headers, sent with the first token: the modelled queue time and TTFT known
  // at that moment.
  asio::awaitable<bool> begin_stream(http::Exchange& ex, const Event& ev, const std::string& rid) {
    Completion so_far;
    so_far.timing = ev.timing;
    so_far.timing.finished = ev.timing.first_token;
    so_far.usage.cached_tokens = ev.cached_tokens;
    so_far.transferred_tokens = ev.transferred_tokens;
    http::Fields fields;
    for (const auto& [k, v] : timing_headers(so_far)) {
      if (k != "X-Sim-E2e-Ms") {  // unknown until the end
        fields.set(k, v);
      }
    }
    fields.set("X-Request-Id", rid);
    co_return co_await ex.begin_sse(std::move(fields));
  }

  // Streaming: tokens as SSE events (SseStream, ResponsesSse), with the plan's stall and drop faults.
  template <typename Stream>
  asio::awaitable<void> reply_stream(http::Exchange& ex, Waiter& w, Registration& reg, const Reply& rp,
                                     Stream sse) {
    const FaultPlan& plan = rp.plan;
    bool stalled = plan.stall == 0;
    bool started = false;
    for (;;) {
      auto ev = co_await next_event(w, ex);
      if (!ev) {
        co_return;
      }
      std::string bytes;
      bool done = false;
      const uint32_t chunks_before = sse.chunks();  // events already written
      if (ev->kind == EventKind::kFinished) {
        reg.finished = true;
        const Completion& c = *ev->completion;
        if (!started) {
          (void)co_await ex.respond(failed_response(rp, c));
          co_return;
        }
        bytes = c.reason == FinishReason::kError
                    ? sse.on_error(flavour, c.error_status, "Simulated engine failure (fault injection).")
                    : sse.on_finished(c);
        done = true;
      } else if (ev->kind == EventKind::kToken) {
        if (!started) {
          if (!co_await begin_stream(ex, *ev, rp.rid)) {
            co_return;
          }
          started = true;
        }
        bytes = sse.on_token(*ev);
      } else {
        continue;
      }
      if (!stalled && chunks_before >= plan.stall_after_events) {
        stalled = true;
        if (!co_await wait_real(std::chrono::nanoseconds(plan.stall), ex)) {
          co_return;
        }
      }
      if (!co_await ex.write(bytes)) {
        co_return;
      }
      if (done) {
        (void)co_await ex.end_stream();
        co_return;
      }
      if (plan.drop_after_events > 0 && sse.chunks() >= plan.drop_after_events) {
        CGN_LOG_INFO(logger, "fault: dropping stream", log::kv("request_id", rp.rid),
                     log::kv("events", sse.chunks()));
        ex.abort();
        co_return;  // the registration aborts the engine request
      }
    }
  }

  asio::awaitable<void> embeddings(http::Exchange& ex) {
    if (!loaded()) {
      (void)co_await ex.respond(loading_response());
      co_return;
    }
    auto body = parse_embeddings_body(ex.request().body());
    if (!body) {
      (void)co_await ex.respond(error_response(400, body.error().message));
      co_return;
    }
    const uint32_t dims = body->dimensions > 0 ? body->dimensions : shell.embedding_dims;
    if (static_cast<uint64_t>(dims) * body->inputs.size() > (uint64_t{4} << 20)) {
      (void)co_await ex.respond(error_response(400, "inputs x dimensions must not exceed 4194304", "input"));
      co_return;
    }
    std::vector<std::vector<float>> vecs;
    vecs.reserve(body->inputs.size());
    uint32_t tokens = 0;
    for (const auto& in : body->inputs) {
      vecs.push_back(embedding_vector(in, dims));
      tokens += static_cast<uint32_t>(in.size());
    }
    const std::string id = "embd-" + request_id(ex.request());
    (void)co_await ex.respond(
        http::make_response(200,
                            render_embeddings_body(id, created_unix + now() / kNanosPerSecond,
                                                   shell.sim.served_model_name, vecs, tokens, body->base64),
                            "application/json"));
  }

  asio::awaitable<void> health(http::Exchange& ex) {
    const HealthAnswer a = health_answer(flavour, loaded());
    (void)co_await ex.respond(
        http::make_response(static_cast<unsigned>(a.status), std::string(a.body),
                            a.content_type.empty() ? "application/json" : a.content_type));
  }

  asio::awaitable<void> models(http::Exchange& ex) {
    if (!loaded()) {
      (void)co_await ex.respond(loading_response());
      co_return;
    }
    (void)co_await ex.respond(
        http::make_response(200,
                            render_models_body(flavour, shell.sim.served_model_name, shell.sim.model,
                                               engine.config().model.max_model_len, created_unix),
                            "application/json"));
  }

  asio::awaitable<void> claim(http::Exchange& ex) {
    auto c = parse_claim_body(ex.request().body());
    if (!c) {
      (void)co_await ex.respond(error_response(400, c.error().message));
      co_return;
    }
    ClaimStatus st = ClaimStatus::kUnknown;
    if (c->engine_id == engine.config().engine_id) {
      st = engine.claim_blocks(c->request_id, c->block_ids, now());
      pump();
    }
    CGN_LOG_DEBUG(logger, "kv claim", log::kv("request_id", c->request_id),
                  log::kv("status", claim_status_name(st)));
    (void)co_await ex.respond(http::make_response(200, render_claim_answer(st), "application/json"));
  }

  asio::awaitable<void> evict(http::Exchange& ex) {
    auto e = parse_evict_body(ex.request().body());
    if (!e) {
      (void)co_await ex.respond(error_response(400, e.error().message));
      co_return;
    }
    const size_t n = e->all ? engine.evict_all(now()) : engine.evict_prefix(e->prefix, now());
    pump();
    (void)co_await ex.respond(
        http::make_response(200, R"({"evicted_blocks":)" + std::to_string(n) + "}", "application/json"));
  }

  // SGLang's /flush_cache: refuses while requests are in flight, as SGLang does.
  asio::awaitable<void> flush_cache(http::Exchange& ex) {
    pump();
    const EngineGauges g = engine.gauges();
    if (g.running + g.waiting > 0) {
      (void)co_await ex.respond(http::make_response(
          400,
          "Cache not flushed. Please check backend logs for more details. (When there are running or "
          "waiting requests, the operation will not be performed.)\n",
          "text/plain"));
      co_return;
    }
    engine.evict_all(now());
    publish_kv_events();
    (void)co_await ex.respond(http::make_response(
        200,
        "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
        "requests, the operation will not be performed.)\n",
        "text/plain"));
  }

  // vLLM's POST /reset_prefix_cache: drops every unreferenced cached block (AllBlocksCleared when
  // none is left). vLLM answers 200 with an empty body.
  asio::awaitable<void> reset_prefix_cache(http::Exchange& ex) {
    engine.evict_all(now());
    pump();
    (void)co_await ex.respond(http::make_response(200, "", "text/plain"));
  }

  asio::awaitable<void> state(http::Exchange& ex) {
    pump();
    const EngineGauges g = engine.gauges();
    const EngineStats& s = engine.stats();
    std::string out = "{";
    auto field = [&out](std::string_view k, auto v) {
      if (out.size() > 1) {
        out += ',';
      }
      out += '"';
      out += k;
      out += "\":";
      out += std::to_string(v);
    };
    field("running", g.running);
    field("waiting", g.waiting);
    field("waiting_for_kv", g.waiting_for_kv);
    field("held_handoffs", g.held_handoffs);
    field("used_blocks", g.used_blocks);
    field("total_blocks", g.total_blocks);
    field("cached_blocks", g.cached_blocks);
    field("block_size", g.block_size);
    field("kv_handoffs_claimed", s.kv_handoffs_claimed);
    field("kv_handoffs_expired", s.kv_handoffs_expired);
    field("kv_pulls_ok", s.kv_pulls_ok);
    field("kv_pulls_failed", s.kv_pulls_failed);
    out += ",\"engine_id\":\"" + engine.config().engine_id +
           "\",\"loaded\":" + (loaded() ? "true" : "false") + "}";
    (void)co_await ex.respond(http::make_response(200, std::move(out), "application/json"));
  }

  // The power model's readings as a dcgm-exporter page (docs/sim.md "Power model").
  std::string dcgm_page() {
    pump();
    const EngineStats& s = engine.stats();
    const NodeModel& m = engine.config().model;
    if (dcgm_labels.gpu_uuid.empty()) {
      char host[256] = {};
      (void)::gethostname(host, sizeof host - 1);
      dcgm_labels = {gpu_uuid_for(engine.config().engine_id), m.gpu_name, host};
    }
    const PowerReading r = power_meter.sample(m, now(), s.prefill_ns, s.decode_ns);
    return render_dcgm_page(r, m.power_limit_watts, dcgm_labels);
  }

  http::RouteTable routes() {
    http::RouteTable rt;
    rt.post("/v1/chat/completions", [this](http::Exchange& ex) { return generate(ex, ApiKind::kChat); });
    rt.post("/v1/completions", [this](http::Exchange& ex) { return generate(ex, ApiKind::kCompletion); });
    if (flavour == Flavour::kMlx) {
      rt.post("/chat/completions", [this](http::Exchange& ex) { return generate(ex, ApiKind::kChat); });
    }
    rt.post("/v1/embeddings", [this](http::Exchange& ex) { return embeddings(ex); });
    if (flavour == Flavour::kVllm) {
      rt.post("/v1/responses", [this](http::Exchange& ex) { return responses(ex); });
    }
    rt.get("/v1/models", [this](http::Exchange& ex) { return models(ex); });
    auto h = [this](http::Exchange& ex) { return health(ex); };
    rt.get(std::string(flavour_traits(flavour).health.path), h);
    if (flavour == Flavour::kLlamacpp) {
      rt.get("/v1/health", h);
    }
    if (flavour == Flavour::kVllm) {
      rt.post("/reset_prefix_cache", [this](http::Exchange& ex) { return reset_prefix_cache(ex); });
    }
    if (flavour == Flavour::kSglang) {
      rt.get("/health_generate", h);
      rt.get("/flush_cache", [this](http::Exchange& ex) { return flush_cache(ex); });
      rt.post("/flush_cache", [this](http::Exchange& ex) { return flush_cache(ex); });
    }
    const std::string_view mpath = flavour_traits(flavour).metrics_path;
    if (shell.sim.metrics_enabled && !mpath.empty()) {
      rt.get(std::string(mpath), http::metrics_handler([this] {
               pump();
               return render_metrics(flavour, engine, mctx);
             }));
      rt.enable_cors(std::string(mpath));
    }
    if (shell.sim.metrics_enabled) {
      rt.get(std::string(kDcgmPath), http::metrics_handler([this] { return dcgm_page(); }));
    }
    if (shell.sim.kv_transfer) {
      rt.post(std::string(kClaimPath), [this](http::Exchange& ex) { return claim(ex); });
    }
    if (shell.sim.admin_enabled) {
      rt.post("/admin/evict", [this](http::Exchange& ex) { return evict(ex); });
      rt.get("/admin/state", [this](http::Exchange& ex) { return state(ex); });
    }
    return rt;
  }

  ShellConfig shell;
  Flavour flavour;
  Engine engine;
  steady_clock::time_point epoch;
  Nanos load_end;
  int64_t created_unix;
  log::Logger logger;
  MetricsContext mctx;
  PowerMeter power_meter;
  DcgmLabels dcgm_labels;
  uint16_t port = 0;

  std::unique_ptr<http::Server> server;
  std::unique_ptr<KvEventPublisher> kv_pub;  // set before the worker starts; used on it only
  std::optional<asio::steady_timer> tick;
  std::unique_ptr<http::HttpClient> client;
  std::unordered_map<RequestHandle, Waiter*> waiters;
  std::vector<Event> scratch;
  Nanos armed = kNever;
  bool pumping = false;
  bool repump = false;
  uint64_t next_id = 0;
  ResponseStore stored_responses;  // POST /v1/responses, store=true
  // Response ids differ per process (the router maps them to nodes).
  uint64_t id_salt = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  uint64_t next_response = 0;
  bool shutting_down = false;
};

SimServer::SimServer(ShellConfig config) : config_(std::move(config)) {}

SimServer::~SimServer() {
  stop();
}

http::HttpResult<uint16_t> SimServer::start() {
  std::string err;
  reserved_fd_ = reserve_port(config_.sim.host, config_.sim.port, port_, err);
  if (reserved_fd_ < 0) {
    return http::http_error(http::HttpError::bind_failed, err);
  }
  EngineConfig ecfg = config_.sim.engine;
  if (!(config_.sim.kv_transfer && !config_.sim.kv_transfer->engine_id.empty())) {
    ecfg.engine_id = "sim-" + std::string(flavour_name(config_.sim.flavour)) + "-" + std::to_string(port_);
  }
  // The side channel shares the API port (POST /internal/kv/claim).
  ecfg.side_channel_port = port_;
  engine_id_ = ecfg.engine_id;
  auto lg = log::get("sim");

  if (config_.sim.faults.refuse_connections) {
    // Accept and close at once: the client sees its connection dropped.
    if (::listen(reserved_fd_, 128) != 0) {
      return http::http_error(http::HttpError::bind_failed, "listen() failed");
    }
    const int fd = reserved_fd_;
    refuser_ = std::thread([fd] {
      for (;;) {
        const int c = ::accept(fd, nullptr, nullptr);
        if (c < 0) {
          if (errno == EINTR || errno == ECONNABORTED) {
            continue;
          }
          return;
        }
        ::close(c);
      }
    });
    CGN_LOG_WARN(lg, "fault: refusing every connection", log::kv("port", port_));
    return port_;
  }

  std::unique_ptr<KvEventPublisher> kv_pub;
  if (config_.sim.kv_events && config_.sim.kv_events->enabled) {
    auto p = KvEventPublisher::start(*config_.sim.kv_events);
    if (!p) {
      return http::http_error(http::HttpError::bind_failed, p.error().message);
    }
    kv_pub = std::move(*p);
    ecfg.record_kv_events = true;
  }
  if (!config_.sim.kvcached_target.empty() && !tier_) {
    auto client = connect_kvcached(config_.sim.kvcached_target, kKvcachedLookupTimeoutMs);
    if (!client.ok()) {
      return http::http_error(http::HttpError::bind_failed, "kvcached: " + client.error().message);
    }
    kvcache::BlockNamespace ns;
    ns.model = config_.sim.served_model_name;
    ns.dtype = "bf16";
    ns.tp_size = static_cast<uint32_t>(std::max(1, ecfg.tp_size));
    ns.block_tokens = ecfg.model.block_size;
    tier_ = std::make_unique<KvcachedTier>(std::move(*client), std::move(ns));
    lg->info("offloading KV to cgn-kvcached at {}", config_.sim.kvcached_target);
  }
  ecfg.offload = tier_.get();
  impl_ = std::make_unique<Impl>(config_, std::move(ecfg));
  impl_->port = port_;
  impl_->kv_pub = std::move(kv_pub);
  http::ServerConfig scfg;
  scfg.host = config_.sim.host == "localhost" ? "127.0.0.1" : config_.sim.host;
  scfg.port = port_;
  scfg.threads = 1;
  scfg.limits.max_body_bytes = kMaxBodyBytes;
  impl_->server = std::make_unique<http::Server>(scfg, impl_->routes());
  impl_->tick.emplace(impl_->server->worker_context(0));
  if (config_.sim.kv_transfer && config_.sim.kv_transfer->kv_role != "kv_producer") {
    impl_->make_client();  // a decode-capable P/D instance: no set-up cost on its first pull
  }

  auto listen_now = [this]() -> http::HttpResult<uint16_t> {
    ::close(reserved_fd_);
    reserved_fd_ = -1;
    return impl_->server->start();
  };
  const bool closed_while_loading = health_answer(config_.sim.flavour, false).listening == false;
  if (!closed_while_loading || config_.sim.load_seconds <= 0) {
    auto p = listen_now();
    if (!p) {
      return p.error();
    }
    CGN_LOG_INFO(lg, "listening", log::kv("flavour", flavour_name(config_.sim.flavour)),
                 log::kv("port", port_), log::kv("model", config_.sim.served_model_name),
                 log::kv("engine_id", engine_id_));
    return port_;
  }
  CGN_LOG_INFO(lg, "loading; port closed until loaded", log::kv("port", port_),
               log::kv("seconds", config_.sim.load_seconds));
  loader_ = std::thread([this, listen_now, lg] {
    std::unique_lock lk(mu_);
    const auto until = impl_->epoch + std::chrono::nanoseconds(impl_->load_end);
    if (cv_.wait_until(lk, until, [this] { return stopping_; })) {
      return;
    }
    auto p = listen_now();
    if (!p) {
      CGN_LOG_ERROR(lg, "listen after loading failed", log::kv("error", p.error().message));
      std::_Exit(1);
    }
    CGN_LOG_INFO(lg, "loaded; listening", log::kv("port", port_));
  });
  return port_;
}

void SimServer::stop() {
  stop(config_.shutdown_grace);
}

void SimServer::stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lk(mu_);
    if (stopping_) {
      return;
    }
    stopping_ = true;
  }
  cv_.notify_all();
  if (loader_.joinable()) {
    loader_.join();
  }
  if (reserved_fd_ >= 0) {
    ::shutdown(reserved_fd_, SHUT_RDWR);  // wakes the refuser's accept()
  }
  if (refuser_.joinable()) {
    refuser_.join();
  }
  if (reserved_fd_ >= 0) {
    ::close(reserved_fd_);
    reserved_fd_ = -1;
  }
  if (impl_) {
    impl_->server->stop(grace);
    // The worker is joined: this thread owns everything now.
    impl_->shutting_down = true;
    impl_->tick.reset();
    impl_->kv_pub.reset();  // sends what is queued, joins its thread
    impl_->client.reset();
    impl_->server.reset();
    impl_.reset();
  }
}

}  // namespace cgn::sim
