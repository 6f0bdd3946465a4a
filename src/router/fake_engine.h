// FakeEngine: a small OpenAI-compatible upstream for the router's tests (not part of any
// product path). It answers chat/completions/embeddings/responses (buffered and SSE), /v1/models,
// /health and a vLLM-format /metrics, and has fault knobs: fail the next N requests with a
// status before the first token, drop the connection mid-stream after K events, stall before
// answering, report unhealthy, report a given queue depth. It records what it saw (headers,
// bodies, cancellations) so tests can assert on the router's behaviour.
//
// Threads: its own http::Server (one worker). Knobs are atomics, settable from any thread;
// the recorded requests are behind a mutex.
#pragma once

// GCC 12 at -O1 with sanitizers: false -Wmismatched-new-delete on Asio coroutine frames (see
// gateway.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/http/server.h"

namespace cgn::router::testing {

namespace asio = boost::asio;

struct SeenRequest {
  std::string target;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
          })) {
        return v;
      }
    }
    return {};
  }
};

class FakeEngine {
 public:
  explicit FakeEngine(std::string name, std::vector<std::string> models = {"test-model"},
                      std::string host = "127.0.0.1", uint16_t port = 0)
      : name_(std::move(name)), models_(std::move(models)) {
    http::ServerConfig sc;
    sc.host = std::move(host);
    sc.port = port;
    sc.threads = 1;
    sc.timer_resolution = std::chrono::milliseconds(10);
    http::RouteTable rt;
    rt.post("/v1/chat/completions", [this](http::Exchange& ex) { return generate(ex, "chat"); });
    rt.post("/v1/completions", [this](http::Exchange& ex) { return generate(ex, "completions"); });
    rt.post("/v1/embeddings", [this](http::Exchange& ex) { return embeddings(ex); });
    rt.post("/v1/responses", [this](http::Exchange& ex) { return responses(ex); });
    rt.get("/v1/models", [this](http::Exchange& ex) { return list_models(ex); });
    rt.get("/health", [this](http::Exchange& ex) -> asio::awaitable<void> {
      health_checks.fetch_add(1);
      // Re-read on every step, so clearing the knob ends a stall in progress.
      for (int waited = 0; waited < health_stall_ms.load(); waited += 10) {
        if (!co_await sleep_ms(10)) {
          co_return;
        }
      }
      (void)co_await ex.respond(http::make_response(healthy.load() ? 200 : 503, "", "text/plain"));
    });
    rt.get("/metrics", http::metrics_handler([this] { return metrics_text(); }));
    server_ = std::make_unique<http::Server>(sc, std::move(rt));
  }

  // Binds and starts; returns the port (0 on failure).
  uint16_t start() {
    auto p = server_->start();
    port_ = p.ok() ? *p : 0;
    return port_;
  }
  void stop() { server_->stop(std::chrono::milliseconds(0)); }

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& name() const { return name_; }

  std::vector<SeenRequest> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

  // --- knobs ---
  std::atomic<bool> healthy{true};
  std::atomic<int> fail_next{0};                // the next N generation requests fail ...
  std::atomic<int> fail_status{500};            // ... with this status, before any token
  std::atomic<bool> fail_engine_closed{false};  // ... marked as an agent whose engine closed (kFailureHeader)
  std::atomic<int> drop_after_events{-1};       // >= 0: close the connection after this many SSE events
  std::atomic<int> close_next{0};       // the next N generation requests: the connection closes, no answer
  std::atomic<int> stall_ms{0};         // wait this long before answering (cancellable)
  std::atomic<int> health_stall_ms{0};  // GET /health answers only after this long, or once cleared
  std::atomic<int> tokens{4};           // tokens per generation
  std::atomic<bool> serve_responses{true};  // false: /v1/responses is a framework 404, as on older engines
  std::atomic<int> token_delay_ms{0};       // between streamed tokens
  std::atomic<double> queue_depth{0};       // reported on /metrics
  std::atomic<double> running{0};
  std::atomic<double> kv_used{0.1};

  // --- counters ---
  std::atomic<int> generations{0};  // generation requests received
  std::atomic<int> completed{0};    // generation responses finished
  std::atomic<int> cancelled{0};    // streams whose client went away mid-way
  std::atomic<int> health_checks{0};

 private:
  std::string metrics_text() const {
    std::string out;
    out += "# TYPE vllm:num_requests_waiting gauge\n";
    out += "vllm:num_requests_waiting{engine=\"0\",model_name=\"" + models_.front() + "\"} " +
           std::to_string(queue_depth.load()) + "\n";
    out += "# TYPE vllm:num_requests_running gauge\n";
    out += "vllm:num_requests_running{engine=\"0\",model_name=\"" + models_.front() + "\"} " +
           std::to_string(running.load()) + "\n";
    out += "# TYPE vllm:kv_cache_usage_perc gauge\n";
    out += "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"" + models_.front() + "\"} " +
           std::to_string(kv_used.load()) + "\n";
    return out;
  }

  void record(http::Exchange& ex) {
    SeenRequest s;
    s.target = std::string(ex.request().target());
    s.body = ex.request().body();
    for (const auto& f : ex.request()) {
      s.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    std::lock_guard lock(mu_);
    if (seen_.size() < 10000) {
      seen_.push_back(std::move(s));
    }
  }

  static asio::awaitable<bool> sleep_ms(int ms) {
    if (ms <= 0) {
      co_return true;
    }
    asio::steady_timer t(co_await asio::this_coro::executor);
    t.expires_after(std::chrono::milliseconds(ms));
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return !ec;
  }

  // JSON is built outside the coroutines: GCC 12 rejects string-literal initializer lists in a
  // coroutine body ("array used as initializer").
  std::string models_body() const {
    nlohmann::json data = nlohmann::json::array();
    for (const auto& m : models_) {
      data.push_back({{"id", m}, {"object", "model"}, {"created", 0}, {"owned_by", "fake"}});
    }
    return nlohmann::json{{"object", "list"}, {"data", data}}.dump();
  }

  static std::string embeddings_body(const std::string& request) {
    const auto j = nlohmann::json::parse(request, nullptr, false);
    const std::string model = j.is_object() && j.contains("model") && j["model"].is_string()
                                  ? j["model"].get<std::string>()
                                  : std::string();
    nlohmann::json body = {
        {"object", "list"},
        {"model", model},
        {"data", {{{"object", "embedding"}, {"index", 0}, {"embedding", {0.25, -0.5, 1.0}}}}},
        {"usage", {{"prompt_tokens", 3}, {"total_tokens", 3}}}};
    return body.dump();
  }

  struct GenRequest {
    bool stream = false;
    bool usage = false;
    std::string model;
  };

  static GenRequest gen_request(const std::string& request) {
    GenRequest g;
    const auto j = nlohmann::json::parse(request, nullptr, false);
    if (!j.is_object()) {
      return g;
    }
    g.stream = j.contains("stream") && j["stream"].is_boolean() && j["stream"].get<bool>();
    g.model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : std::string();
    g.usage = j.contains("stream_options") && j["stream_options"].is_object() &&
              j["stream_options"].contains("include_usage") &&
              j["stream_options"]["include_usage"].is_boolean() &&
              j["stream_options"]["include_usage"].get<bool>();
    return g;
  }

  std::string full_body(const GenRequest& g, bool chat, int n) const {
    std::string text;
    for (int i = 0; i < n; ++i) {
      text += "tok" + std::to_string(i) + " ";
    }
    nlohmann::json choice = chat ? nlohmann::json{{"index", 0},
                                                  {"message", {{"role", "assistant"}, {"content", text}}},
                                                  {"finish_reason", "stop"}}
                                 : nlohmann::json{{"index", 0}, {"text", text}, {"finish_reason", "stop"}};
    nlohmann::json body = {
        {"id", (chat ? "chatcmpl-" : "cmpl-") + name_},
        {"object", chat ? "chat.completion" : "text_completion"},
        {"created", 0},
        {"model", g.model},
        {"choices", {choice}},
        {"usage", {{"prompt_tokens", 7}, {"completion_tokens", n}, {"total_tokens", 7 + n}}}};
    return body.dump();
  }

  std::string chunk_body(const GenRequest& g, bool chat, int i, int n) const {
    nlohmann::json finish = i + 1 == n ? nlohmann::json("stop") : nlohmann::json(nullptr);
    nlohmann::json choice =
        chat ? nlohmann::json{{"index", 0},
                              {"delta", {{"content", "tok" + std::to_string(i) + " "}}},
                              {"finish_reason", finish}}
             : nlohmann::json{
                   {"index", 0}, {"text", "tok" + std::to_string(i) + " "}, {"finish_reason", finish}};
    nlohmann::json chunk = {{"id", (chat ? "chatcmpl-" : "cmpl-") + name_},
                            {"object", chat ? "chat.completion.chunk" : "text_completion"},
                            {"created", 0},
                            {"model", g.model},
                            {"choices", {choice}}};
    return chunk.dump();
  }

  std::string usage_chunk(const GenRequest& g, bool chat, int n) const {
    nlohmann::json chunk = {
        {"id", (chat ? "chatcmpl-" : "cmpl-") + name_},
        {"object", chat ? "chat.completion.chunk" : "text_completion"},
        {"created", 0},
        {"model", g.model},
        {"choices", nlohmann::json::array()},
        {"usage", {{"prompt_tokens", 7}, {"completion_tokens", n}, {"total_tokens", 7 + n}}}};
    return chunk.dump();
  }

  asio::awaitable<void> list_models(http::Exchange& ex) {
    (void)co_await ex.respond(http::make_response(200, models_body()));
  }

  // Takes one from a "next N requests" knob; true when one was left.
  static bool take(std::atomic<int>& knob) {
    int n = knob.load();
    while (n > 0 && !knob.compare_exchange_weak(n, n - 1)) {
    }
    return n > 0;
  }

  // True when this request must fail (and has been answered with the failure).
  asio::awaitable<bool> maybe_fail(http::Exchange& ex) {
    if (!take(fail_next)) {
      co_return false;
    }
    const int status = fail_status.load();
    http::Response res = http::make_response(
        static_cast<unsigned>(status),
        R"({"error":{"message":"injected failure","type":"server_error","param":null,"code":null}})");
    if (status == 429) {
      res.set(http::Field::retry_after, "1");
    }
    if (fail_engine_closed.load()) {
      res.set(http::kFailureHeader, http::kFailureEngineClosed);
    }
    (void)co_await ex.respond(std::move(res));
    co_return true;
  }

  asio::awaitable<void> embeddings(http::Exchange& ex) {
    record(ex);
    generations.fetch_add(1);
    if (co_await maybe_fail(ex)) {
      co_return;
    }
    http::Response res = http::make_response(200, embeddings_body(ex.request().body()));
    res.set("X-Fake-Engine", name_);
    (void)co_await ex.respond(std::move(res));
    completed.fetch_add(1);
  }

  asio::awaitable<void> generate(http::Exchange& ex, std::string kind) {
    record(ex);
    generations.fetch_add(1);
    if (take(close_next)) {
      ex.abort();  // as an engine that dies of the request: no status line, nothing
      co_return;
    }
    if (!co_await sleep_ms(stall_ms.load())) {
      cancelled.fetch_add(1);
      co_return;
    }
    if (co_await maybe_fail(ex)) {
      co_return;
    }
    const GenRequest g = gen_request(ex.request().body());
    const int n = tokens.load();
    const bool chat = kind == "chat";
    if (!g.stream) {
      http::Response res = http::make_response(200, full_body(g, chat, n));
      res.set("X-Fake-Engine", name_);
      (void)co_await ex.respond(std::move(res));
      completed.fetch_add(1);
      co_return;
    }
    http::Fields h;
    h.set("X-Fake-Engine", name_);
    if (!(co_await ex.begin_sse(std::move(h))).ok()) {
      cancelled.fetch_add(1);
      co_return;
    }
    int events = 0;
    auto send = [&](std::string data) -> asio::awaitable<bool> {
      const int drop = drop_after_events.load();
      if (drop >= 0 && events >= drop) {
        ex.abort();
        co_return false;
      }
      http::SseEvent e;
      e.data = std::move(data);
      ++events;
      co_return (co_await ex.write_event(e)).ok();
    };
    for (int i = 0; i < n; ++i) {
      if (i > 0 && !co_await sleep_ms(token_delay_ms.load())) {
        cancelled.fetch_add(1);
        co_return;
      }
      if (!co_await send(chunk_body(g, chat, i, n))) {
        if (drop_after_events.load() < 0) {
          cancelled.fetch_add(1);
        }
        co_return;
      }
    }
    if (g.usage) {
      if (!co_await send(usage_chunk(g, chat, n))) {
        co_return;
      }
    }
    if (!co_await send("[DONE]")) {
      co_return;
    }
    (void)co_await ex.end_stream();
    completed.fetch_add(1);
  }

  // /v1/responses, vLLM-shaped: ids resp_<engine>_<n> kept in this process; a previous_response_id
  // it did not make is a 404 OpenAI error, as vLLM answers one it does not hold.
  struct ResponsesTurn {
    bool stream = false;
    bool unknown_previous = false;
    std::string id;
  };
  ResponsesTurn responses_turn(const std::string& request) {
    ResponsesTurn t;
    const auto j = nlohmann::json::parse(request, nullptr, false);
    t.stream = j.is_object() && j.value("stream", false);
    const std::string prev =
        j.is_object() && j.contains("previous_response_id") && j["previous_response_id"].is_string()
            ? j["previous_response_id"].get<std::string>()
            : std::string();
    std::lock_guard lock(mu_);
    t.unknown_previous =
        !prev.empty() && std::find(responses_.begin(), responses_.end(), prev) == responses_.end();
    if (!t.unknown_previous) {
      t.id = "resp_" + name_ + "_" + std::to_string(responses_.size());
      responses_.push_back(t.id);
    }
    return t;
  }
  std::string response_body(const std::string& id, bool done) const {
    nlohmann::json r = {{"id", id},
                        {"object", "response"},
                        {"status", done ? "completed" : "in_progress"},
                        {"model", models_.front()},
                        {"output", nlohmann::json::array()}};
    if (done) {
      r["output"].push_back({{"type", "message"},
                             {"role", "assistant"},
                             {"content", {{{"type", "output_text"}, {"text", "tok0 "}}}}});
      r["usage"] = {{"input_tokens", 7}, {"output_tokens", 1}, {"total_tokens", 8}};
    }
    return r.dump();
  }
  static std::string response_event(const std::string& type, const std::string& response, int seq) {
    nlohmann::json e = {{"type", type}, {"sequence_number", seq}};
    if (type == "response.output_text.delta") {
      e["delta"] = "tok0 ";
    } else {
      e["response"] = nlohmann::json::parse(response);
    }
    return e.dump();
  }
  asio::awaitable<void> responses(http::Exchange& ex) {
    if (!serve_responses.load()) {
      (void)co_await ex.respond(http::make_response(404, R"({"detail":"Not Found"})"));
      co_return;
    }
    record(ex);
    generations.fetch_add(1);
    const ResponsesTurn t = responses_turn(ex.request().body());
    if (t.unknown_previous) {
      (void)co_await ex.respond(http::make_response(
          404,
          R"({"error":{"message":"Response not found","type":"invalid_request_error","param":null,"code":404}})"));
      co_return;
    }
    if (!t.stream) {
      http::Response res = http::make_response(200, response_body(t.id, true));
      res.set("X-Fake-Engine", name_);
      (void)co_await ex.respond(std::move(res));
      completed.fetch_add(1);
      co_return;
    }
    http::Fields h;
    h.set("X-Fake-Engine", name_);
    if (!(co_await ex.begin_sse(std::move(h))).ok()) {
      co_return;
    }
    const char* types[] = {"response.created", "response.output_text.delta", "response.completed"};
    for (int i = 0; i < 3; ++i) {
      http::SseEvent e;
      e.event = types[i];
      e.data = response_event(types[i], response_body(t.id, i == 2), i);
      if (!(co_await ex.write_event(e)).ok()) {
        co_return;
      }
    }
    (void)co_await ex.end_stream();
    completed.fetch_add(1);
  }

  std::string name_;
  std::vector<std::string> models_;
  std::vector<std::string> responses_;  // ids this engine made (under mu_)
  std::unique_ptr<http::Server> server_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::vector<SeenRequest> seen_;
};

}  // namespace cgn::router::testing

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
