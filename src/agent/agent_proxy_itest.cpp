// AgentProxy on loopback: in front of the real simulator (cgn-engine-sim) for replies and
// digests, and in front of a small in-process upstream where a test must see exactly what the
// engine received (body untouched, hop-by-hop headers dropped, disconnect cancelling).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/agent_proxy.h"
#include "core/canonical.h"
#include "core/http/server.h"
#include "testing/engine_sim.h"
#include "testing/process.h"
#include "testing/run_on.h"
#include "testing/test_certs.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::testing::wait_until;
namespace asio = boost::asio;

using cgn::testing::run_on;

struct Recorder {
  std::mutex mu;
  std::vector<std::vector<Digest>> chains;
  PrefixRecorder fn() {
    return [this](std::span<const Digest> c) {
      std::lock_guard lock(mu);
      chains.emplace_back(c.begin(), c.end());
    };
  }
  size_t size() {
    std::lock_guard lock(mu);
    return chains.size();
  }
  std::vector<Digest> last() {
    std::lock_guard lock(mu);
    return chains.back();
  }
};

// The simulator in echo mode, fast; `fault_rules`: its --fault-rules file (sim/fault_rules.h).
cgn::testing::EngineSimOptions sim_options(const std::string& fault_rules = "") {
  cgn::testing::EngineSimOptions o;
  o.args = {"--time-scale", "0.01", "--mode", "echo"};
  o.fault_rules = fault_rules;
  return o;
}

struct Harness {
  Harness(uint16_t engine_port, PrefixRecorder rec, std::string metrics_path = "/metrics", size_t threads = 2,
          const std::function<void(AgentProxyOptions&)>& tweak = {}) {
    AgentProxyOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = threads;
    o.node_id = "n1";
    o.engine = http::Upstream{"127.0.0.1", engine_port, false};
    o.engine_metrics_path = std::move(metrics_path);
    if (tweak) {
      tweak(o);
    }
    proxy = std::make_unique<AgentProxy>(
        o,
        [this] {
          return EngineHealth{ready.load(), ready.load() ? "ready" : "starting"};
        },
        std::move(rec));
    auto p = proxy->start();
    EXPECT_TRUE(p.ok());
    port = p.ok() ? *p : 0;
  }
  ~Harness() { proxy->stop(0ms); }
  http::HttpResult<http::Response> post(const std::string& path, const std::string& body,
                                        http::Fields extra = {}) {
    http::Request r{http::Verb::post, path, 11};
    r.set(http::Field::content_type, "application/json");
    for (const auto& f : extra) {
      r.insert(f.name_string(), f.value());
    }
    r.body() = body;
    r.prepare_payload();
    return run_on(ctx, client.send(http::Upstream{"127.0.0.1", port, false}, std::move(r)));
  }
  http::HttpResult<http::Response> get(const std::string& path) {
    http::Request r{http::Verb::get, path, 11};
    return run_on(ctx, client.send(http::Upstream{"127.0.0.1", port, false}, std::move(r)));
  }
  std::atomic<bool> ready{true};
  std::unique_ptr<AgentProxy> proxy;
  uint16_t port = 0;
  asio::io_context ctx;
  http::HttpClient client{ctx};
};

std::vector<Digest> digests_of(std::string_view path, const std::string& body) {
  return completion_digests(path, body, nullptr, 256);
}

bool is_prefix(const std::vector<Digest>& a, const std::vector<Digest>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

std::string long_text(const std::string& seed) {
  std::string s;
  while (s.size() < 1500) {
    s += seed + " the quick brown fox jumps over the lazy dog. ";
  }
  return s;
}

nlohmann::json chat_body(const nlohmann::json& messages, bool stream) {
  nlohmann::json b = {{"model", "m"}, {"messages", messages}, {"max_tokens", 300}};
  if (stream) {
    b["stream"] = true;
  }
  return b;
}

TEST(AgentProxy, buffered_chat_is_relayed_and_its_digests_cover_the_next_turn) {
  cgn::testing::EngineSim sim(sim_options());
  Recorder rec;
  Harness h(sim.port(), rec.fn());
  nlohmann::json messages = {{{"role", "system"}, {"content", long_text("system")}},
                             {{"role", "user"}, {"content", long_text("question")}}};
  auto res = h.post("/v1/chat/completions", chat_body(messages, false).dump());
  ASSERT_TRUE(res.ok()) << res.error().message;
  ASSERT_EQ(res->result_int(), 200u) << res->body();
  auto j = nlohmann::json::parse(res->body());
  const std::string reply = j["choices"][0]["message"]["content"];
  ASSERT_FALSE(reply.empty());
  ASSERT_TRUE(wait_until([&] { return rec.size() == 1; }, 5s));
  const auto recorded = rec.last();
  const auto request_only = digests_of("/v1/chat/completions", chat_body(messages, false).dump());
  // The reply extends the chain: more digests than the request alone, which are its prefix.
  EXPECT_GT(recorded.size(), request_only.size());
  EXPECT_TRUE(is_prefix(request_only, recorded));
  // Turn N+1 (the reply sent back as an assistant message) starts with every recorded digest.
  messages.push_back({{"role", "assistant"}, {"content", reply}});
  messages.push_back({{"role", "user"}, {"content", "and then?"}});
  EXPECT_TRUE(is_prefix(recorded, digests_of("/v1/chat/completions", chat_body(messages, false).dump())));
}

TEST(AgentProxy, streamed_chat_is_relayed_per_event_and_deltas_make_the_reply_digests) {
  cgn::testing::EngineSim sim(sim_options());
  Recorder rec;
  Harness h(sim.port(), rec.fn());
  nlohmann::json messages = {{{"role", "user"}, {"content", long_text("stream")}}};
  http::Request r{http::Verb::post, "/v1/chat/completions", 11};
  r.set(http::Field::content_type, "application/json");
  r.body() = chat_body(messages, true).dump();
  r.prepare_payload();
  auto s = run_on(h.ctx, h.client.stream(http::Upstream{"127.0.0.1", h.port, false}, std::move(r)));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->status(), 200u);
  EXPECT_TRUE(std::string(s->headers()[http::Field::content_type]).starts_with("text/event-stream"));
  std::string content;
  size_t events = 0;
  bool done = false;
  while (true) {
    auto ev = run_on(h.ctx, s->next_event());
    ASSERT_TRUE(ev.ok()) << ev.error().message;
    if (!ev->has_value()) {
      break;
    }
    ++events;
    if ((*ev)->is_done()) {
      done = true;
      continue;
    }
    auto j = nlohmann::json::parse((*ev)->data);
    if (!j["choices"].empty() && j["choices"][0]["delta"].contains("content") &&
        j["choices"][0]["delta"]["content"].is_string()) {
      content += j["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_TRUE(done);
  EXPECT_GT(events, 3u);
  ASSERT_TRUE(wait_until([&] { return rec.size() == 1; }, 5s));
  messages.push_back({{"role", "assistant"}, {"content", content}});
  messages.push_back({{"role", "user"}, {"content", "more"}});
  const auto next = digests_of("/v1/chat/completions", chat_body(messages, false).dump());
  const auto recorded = rec.last();
  EXPECT_TRUE(is_prefix(recorded, next));
  EXPECT_GT(recorded.size(),
            digests_of("/v1/chat/completions", chat_body({messages[0]}, false).dump()).size());
}

TEST(AgentProxy, digests_run_off_the_worker_so_the_next_request_does_not_wait) {
  cgn::testing::EngineSim sim(sim_options());
  // A recorder that blocks until the test lets it go (at most 10 s).
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, released = false, returned = false;
  PrefixRecorder rec = [&](std::span<const Digest>) {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait_for(lock, 10s, [&] { return released; });
    returned = true;
  };
  Harness h(sim.port(), rec, "", /*threads=*/1);  // one worker: blocking it would block everything
  const std::string body = chat_body({{{"role", "user"}, {"content", long_text("first")}}}, false).dump();
  auto first = h.post("/v1/chat/completions", body);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_EQ(first->result_int(), 200u);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return entered; }));
  }
  auto second = h.get("/health");  // served by the same (only) worker
  bool recorder_still_blocked = false;
  {
    std::lock_guard lock(mu);
    recorder_still_blocked = !returned;
    released = true;
    cv.notify_all();
  }
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->result_int(), 200u);
  EXPECT_TRUE(recorder_still_blocked);
  h.proxy->stop(0ms);  // waits for the digest thread
  EXPECT_EQ(h.proxy->chains_recorded(), 1u);
}

TEST(AgentProxy, completions_record_the_prompt_and_failures_record_nothing) {
  cgn::testing::EngineSim sim(sim_options("prompt:fail-with-500 error=500\n"));
  Recorder rec;
  Harness h(sim.port(), rec.fn());
  const std::string body =
      nlohmann::json{{"model", "m"}, {"prompt", long_text("p")}, {"max_tokens", 4}}.dump();
  auto res = h.post("/v1/completions", body);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->result_int(), 200u);
  ASSERT_TRUE(wait_until([&] { return rec.size() == 1; }, 5s));
  EXPECT_EQ(rec.last(), digests_of("/v1/completions", body));
  // A wrong model (404 from vLLM) and an engine error: relayed, nothing recorded.
  auto bad = h.post("/v1/completions", nlohmann::json{{"model", "other"}, {"prompt", "x"}}.dump());
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->result_int(), 404u);
  auto err = h.post("/v1/completions",
                    nlohmann::json{{"model", "m"}, {"prompt", long_text("p") + " fail-with-500"}}.dump());
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->result_int(), 500u);
  // Embeddings are relayed but hold no KV prefix.
  auto emb = h.post("/v1/embeddings", nlohmann::json{{"model", "m"}, {"input", "hi"}}.dump());
  ASSERT_TRUE(emb.ok());
  EXPECT_EQ(emb->result_int(), 200u);
  h.proxy->stop(0ms);  // digests run on their own thread: stop() waits for what was queued
  EXPECT_EQ(rec.size(), 1u);
  EXPECT_EQ(h.proxy->chains_recorded(), 1u);
}

TEST(AgentProxy, health_follows_the_engine_and_metrics_include_the_engines) {
  cgn::testing::EngineSim sim(sim_options());
  Harness h(sim.port(), nullptr);
  auto ok = h.get("/health");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->result_int(), 200u);
  EXPECT_NE(ok->body().find(R"("engine":"ready")"), std::string::npos);
  h.ready = false;
  auto down = h.get("/health");
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->result_int(), 503u);
  EXPECT_NE(down->body().find(R"("engine":"starting")"), std::string::npos);
  ASSERT_TRUE(
      h.post("/v1/completions", nlohmann::json{{"model", "m"}, {"prompt", "x"}, {"max_tokens", 2}}.dump())
          .ok());
  auto m = h.get("/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->result_int(), 200u);
  EXPECT_NE(m->body().find(R"(cgn_agent_requests_total{endpoint="completions",code="200"} 1)"),
            std::string::npos)
      << m->body().substr(0, 2000);
  EXPECT_NE(m->body().find("vllm:num_requests_running"), std::string::npos);
  EXPECT_EQ(h.get("/nope")->result_int(), 404u);
}

TEST(AgentProxy, engine_down_is_503_while_not_ready_and_502_once_ready) {
  const auto dead_port = static_cast<uint16_t>(cgn::testing::free_port());
  Harness h(dead_port, nullptr);
  h.ready = false;
  auto r = h.post("/v1/completions", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result_int(), 503u);
  EXPECT_NE(r->body().find("engine_not_ready"), std::string::npos);
  h.ready = true;
  r = h.post("/v1/completions", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result_int(), 502u);
  // A refused connect never reached the engine: not the router's "closed on the request" case.
  EXPECT_EQ(r->find(http::kFailureHeader), r->end());
}

// An upstream that records what it received and streams until its client goes away.
struct EchoUpstream {
  EchoUpstream() {
    http::RouteTable routes;
    auto echo = [this](http::Exchange& ex) -> asio::awaitable<void> {
      {
        std::lock_guard lock(mu);
        body = ex.request().body();
        target = std::string(ex.request().target());
        headers.clear();
        for (const auto& f : ex.request()) {
          headers[std::string(f.name_string())] = std::string(f.value());
        }
      }
      co_await ex.respond(http::make_response(200, "{\"ok\":true}"));
    };
    routes.post("/v1/echo", echo);
    routes.post("/v1/completions", echo);
    routes.post("/v1/chat/completions", [this](http::Exchange& ex) -> asio::awaitable<void> {
      (void)co_await ex.begin_sse();
      asio::steady_timer t(co_await asio::this_coro::executor);
      for (int i = 0; i < 2000 && ex.client_open(); ++i) {
        http::SseEvent e;
        e.data = R"({"choices":[{"index":0,"delta":{"content":"x"}}]})";
        if (!(co_await ex.write_event(e)).ok()) {
          break;
        }
        t.expires_after(5ms);
        boost::system::error_code ec;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      gone = !ex.client_open();
    });
    // Three events and the end of the body in one write (what an engine's burst looks like).
    routes.post("/v1/burst", [](http::Exchange& ex) -> asio::awaitable<void> {
      http::Fields h;
      h.set(http::Field::content_type, "text/event-stream");
      (void)ex.begin_stream_deferred(200, std::move(h));
      (void)co_await ex.end_stream("data: 1\n\n: a comment\r\ndata: 2\r\n\r\ndata: [DONE]\n\n");
    });
    // The connection dies before any answer (an engine that crashed on the request).
    routes.post("/v1/crash", [](http::Exchange& ex) -> asio::awaitable<void> {
      ex.abort();
      co_return;
    });
    // Headers, then the connection dies before the first event.
    routes.post("/v1/cut", [](http::Exchange& ex) -> asio::awaitable<void> {
      (void)co_await ex.begin_sse();
      ex.abort();
    });
    server = std::make_unique<http::Server>(http::ServerConfig{}, std::move(routes));
    port = *server->start();
  }
  ~EchoUpstream() { server->stop(0ms); }
  std::mutex mu;
  std::string body;
  std::string target;
  std::map<std::string, std::string> headers;
  std::atomic<bool> gone{false};
  std::unique_ptr<http::Server> server;
  uint16_t port = 0;
};

TEST(AgentProxy, body_is_forwarded_byte_for_byte_without_hop_by_hop_headers) {
  EchoUpstream up;
  Harness h(up.port, nullptr, "");
  const std::string body = "{\"model\": \"m\",   \"odd\" : [1, 2.50, \"\\u00e9\"]}\n";
  http::Fields extra;
  extra.set("X-CGN-Request-Id", "req-1");
  extra.set("Proxy-Authorization", "secret");
  extra.set("Keep-Alive", "timeout=5");
  auto r = h.post("/v1/echo", body, extra);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result_int(), 200u);
  EXPECT_EQ(r->body(), "{\"ok\":true}");
  std::lock_guard lock(up.mu);
  EXPECT_EQ(up.body, body);
  EXPECT_EQ(up.headers["X-CGN-Request-Id"], "req-1");
  EXPECT_FALSE(up.headers.contains("Proxy-Authorization"));
  EXPECT_FALSE(up.headers.contains("Keep-Alive"));
}

// Probe: kv_transfer_params sent straight to an agent made its engine pull "KV" from a host of the
// client's choosing and pin KV blocks. Now the agent drops them unless the router sent them.
TEST(AgentProxy, kv_transfer_params_reach_the_engine_only_from_the_router) {
  EchoUpstream up;
  Harness h(up.port, nullptr, "");
  const std::string ssrf =
      R"({"model":"m","prompt":"x","kv_transfer_params":{"do_remote_prefill":true,"remote_host":"10.9.9.9",)"
      R"("remote_port":5600,"remote_block_ids":[1,2]}})";
  auto direct = h.post("/v1/completions", ssrf);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->result_int(), 200u);
  {
    std::lock_guard lock(up.mu);
    const auto seen = nlohmann::json::parse(up.body);
    EXPECT_FALSE(seen.contains("kv_transfer_params")) << up.body;
    EXPECT_EQ(seen["prompt"], "x");
  }
  // A key spelled with an escape is the same key.
  auto escaped = h.post("/v1/completions", R"({"model":"m","prompt":"x","kv_transfer\u005fparams":{"a":1}})");
  ASSERT_TRUE(escaped.ok());
  {
    std::lock_guard lock(up.mu);
    EXPECT_EQ(up.body.find("kv_transfer"), std::string::npos) << up.body;
  }
  // A body the agent cannot read (Python's json would: NaN) is refused, not forwarded unseen.
  auto unreadable = h.post("/v1/completions", R"({"model":"m","x":NaN,"kv_transfer_params":{"a":1}})");
  ASSERT_TRUE(unreadable.ok());
  EXPECT_EQ(unreadable->result_int(), 400u);
  EXPECT_NE(unreadable->body().find("kv_transfer_params"), std::string::npos);
  // The router's decode leg keeps them, byte for byte.
  http::Fields leg;
  leg.set("X-CGN-Role", "decode");
  auto from_router = h.post("/v1/completions", ssrf, leg);
  ASSERT_TRUE(from_router.ok());
  std::lock_guard lock(up.mu);
  EXPECT_EQ(up.body, ssrf);
}

TEST(AgentProxy, kv_offload_cgn_hands_the_engine_the_prompt_digests_and_what_kvcached_holds) {
  EchoUpstream up;
  Harness h(up.port, nullptr, "", 2, [](AgentProxyOptions& o) {
    o.kv_hints = [](std::string_view path, std::string_view body) {
      KvHints h;
      h.prefix = completion_digests(path, body, nullptr, 256);
      h.resident.assign(h.prefix.begin(), h.prefix.begin() + std::min<size_t>(h.prefix.size(), 2));
      return h;
    };
  });
  const std::string prompt(1100, 'p');  // four full 256-byte blocks of canonical prompt and more
  const std::string body = R"({"model":"m","prompt":")" + prompt + R"("})";
  const auto want = completion_digests("/v1/completions", body, nullptr, 256);
  ASSERT_GE(want.size(), 4u);
  http::Fields leg;
  leg.set("X-CGN-Role", "prefill");  // the router's P/D params are kept and merged into
  auto r = h.post(
      "/v1/completions",
      R"({"model":"m","prompt":")" + prompt + R"(","kv_transfer_params":{"do_remote_decode":true}})", leg);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result_int(), 200u);
  std::lock_guard lock(up.mu);
  const auto seen = nlohmann::json::parse(up.body);
  const auto& p = seen["kv_transfer_params"];
  EXPECT_EQ(p["do_remote_decode"], true);
  ASSERT_EQ(p["cgn_prefix_digests"].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p["cgn_prefix_digests"][i], to_hex(want[i]));
  }
  ASSERT_EQ(p["cgn_resident_digests"].size(), 2u);
  EXPECT_EQ(p["cgn_resident_digests"][1], to_hex(want[1]));
  EXPECT_EQ(seen["prompt"], prompt);
}

// Probe: every client header reached the engine (X-Sim-Fault: exit shut simulators down), and so
// did the query string. Now the agent applies the router's allow-list and drops the query.
TEST(AgentProxy, only_allow_listed_and_cognitora_headers_reach_the_engine_without_a_query) {
  EchoUpstream up;
  Harness h(up.port, nullptr, "");
  http::Fields extra;
  extra.set("X-Sim-Fault", "exit");
  extra.set("Authorization", "Bearer client-key");
  extra.set("Cookie", "a=b");
  extra.set("OpenAI-Project", "proj-1");
  extra.set("X-Request-Id", "cgn-0123");
  extra.set("X-Forwarded-For", "10.0.0.1");
  auto r = h.post("/v1/completions?debug=1", R"({"model":"m","prompt":"x"})", extra);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result_int(), 200u);
  std::lock_guard lock(up.mu);
  EXPECT_EQ(up.target, "/v1/completions");
  EXPECT_FALSE(up.headers.contains("X-Sim-Fault"));
  EXPECT_FALSE(up.headers.contains("Authorization"));
  EXPECT_FALSE(up.headers.contains("Cookie"));
  EXPECT_EQ(up.headers["OpenAI-Project"], "proj-1");
  EXPECT_EQ(up.headers["X-Request-Id"], "cgn-0123");
  EXPECT_EQ(up.headers["X-Forwarded-For"], "10.0.0.1");
  EXPECT_EQ(up.headers["Content-Type"], "application/json");
}

// Probe reproduction: a client that reaches the agent directly, bypassing the router's keys.
TEST(AgentProxy, data_path_answers_only_requests_with_a_cluster_token) {
  EchoUpstream up;
  const std::string current = "cluster-token-new-0123456789";
  const std::string previous = "cluster-token-old-0123456789";
  Harness h(up.port, nullptr, "", 2, [&](AgentProxyOptions& o) {
    o.cluster_token = auth::ClusterToken({current, previous});
  });
  const std::string body = R"({"model":"m"})";
  auto bare = h.post("/v1/echo", body);
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_EQ(bare->result_int(), 401u);
  const auto err = nlohmann::json::parse(bare->body(), nullptr, false);
  ASSERT_TRUE(err.is_object()) << bare->body();
  EXPECT_NE(err["error"]["message"].get<std::string>().find("X-CGN-Cluster-Token"), std::string::npos);
  {
    std::lock_guard lock(up.mu);
    EXPECT_TRUE(up.body.empty());  // never reached the engine
  }
  http::Fields wrong;
  wrong.set(auth::kClusterTokenHeader, "cluster-token-bad-0123456789");
  EXPECT_EQ(h.post("/v1/echo", body, wrong)->result_int(), 401u);
  for (const auto& t : {current, previous}) {  // both tokens while a rotation overlaps
    http::Fields ok;
    ok.set(auth::kClusterTokenHeader, t);
    auto r = h.post("/v1/echo", body, ok);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->result_int(), 200u) << r->body();
    std::lock_guard lock(up.mu);
    EXPECT_EQ(up.body, body);
    EXPECT_FALSE(up.headers.contains(std::string(auth::kClusterTokenHeader)));  // not passed to the engine
  }
  EXPECT_EQ(h.get("/health")->result_int(), 200u);  // health stays open (no user data)
}

// [tls] with require_client_cert: the router's verified certificate stands in for the token; a
// client without one does not get through the handshake.
TEST(AgentProxy, mutual_tls_client_certificate_stands_in_for_the_token) {
  EchoUpstream up;
  cgn::testing::TempDir dir;
  cgn::testing::TestCa ca(dir.path(), "cluster");
  const auto agent_cert = ca.issue("agent");
  const auto router_cert = ca.issue("router");
  Harness h(up.port, nullptr, "", 2, [&](AgentProxyOptions& o) {
    o.cluster_token = auth::ClusterToken({"cluster-token-0123456789"});
    o.tls.ca_file = ca.ca_file();
    o.tls.cert_file = agent_cert.cert;
    o.tls.key_file = agent_cert.key;
  });
  ASSERT_NE(h.port, 0);
  auto send = [&](http::ClientConfig cc) {
    asio::io_context ctx;
    http::HttpClient client(ctx, cc);
    http::Request r{http::Verb::post, "/v1/echo", 11};
    r.body() = "{}";
    r.prepare_payload();
    return run_on(ctx, client.send(http::Upstream{"127.0.0.1", h.port, true}, std::move(r)));
  };
  http::ClientConfig with_cert;
  with_cert.tls_ca_file = ca.ca_file();
  with_cert.tls_cert_file = router_cert.cert;
  with_cert.tls_key_file = router_cert.key;
  auto ok = send(with_cert);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->result_int(), 200u) << ok->body();
  http::ClientConfig no_cert;
  no_cert.tls_ca_file = ca.ca_file();
  auto refused = send(no_cert);
  EXPECT_FALSE(refused.ok() && refused->result_int() == 200u);
}

TEST(AgentProxy, client_disconnect_cancels_the_engine_stream) {
  EchoUpstream up;
  Recorder rec;
  Harness h(up.port, rec.fn(), "");
  {
    http::Request r{http::Verb::post, "/v1/chat/completions", 11};
    r.body() = R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})";
    r.prepare_payload();
    auto s = run_on(h.ctx, h.client.stream(http::Upstream{"127.0.0.1", h.port, false}, std::move(r)));
    ASSERT_TRUE(s.ok());
    auto ev = run_on(h.ctx, s->next_event());
    ASSERT_TRUE(ev.ok());
    ASSERT_TRUE(ev->has_value());
  }  // the stream is dropped unread: its connection closes
  EXPECT_TRUE(wait_until([&] { return up.gone.load(); }, 10s));
  h.proxy->stop(0ms);         // and whatever the digest thread had queued is done
  EXPECT_EQ(rec.size(), 0u);  // a cut stream is not a completion
}

// The agent's raw answer to one request (Connection: close), bytes as they came.
std::string raw_exchange(uint16_t port, const std::string& request) {
  asio::io_context ctx;
  asio::ip::tcp::socket sock(ctx);
  sock.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  timeval tv{10, 0};
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  asio::write(sock, asio::buffer(request));
  std::string out;
  char buf[4096];
  boost::system::error_code ec;
  while (!ec) {
    const size_t n = sock.read_some(asio::buffer(buf), ec);
    out.append(buf, n);
  }
  return out;
}

TEST(AgentProxy, events_read_together_go_out_as_one_chunk_re_serialised) {
  EchoUpstream up;
  Harness h(up.port, nullptr, "");
  const std::string body = "{}";
  const std::string wire = raw_exchange(
      h.port, "POST /v1/burst HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 2\r\n\r\n" + body);
  ASSERT_EQ(wire.rfind("HTTP/1.1 200", 0), 0u) << wire;
  const size_t head_end = wire.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << wire;
  EXPECT_NE(wire.substr(0, head_end).find("text/event-stream"), std::string::npos) << wire;
  // One chunk holding the three events (comment dropped, line ends normalised), then the end.
  const std::string events = "data: 1\n\ndata: 2\n\ndata: [DONE]\n\n";
  char size_line[16];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", events.size());
  EXPECT_EQ(wire.substr(head_end + 4), std::string(size_line) + events + "\r\n0\r\n\r\n");
}

TEST(AgentProxy, engine_closing_before_any_answer_is_a_502_marked_engine_closed) {
  EchoUpstream up;
  Harness h(up.port, nullptr, "");
  // Whether or not the supervisor has seen the engine die yet.
  for (const bool ready : {true, false}) {
    h.ready = ready;
    auto r = h.post("/v1/crash", "{}");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->result_int(), 502u) << ready;
    EXPECT_EQ((*r)[http::kFailureHeader], http::kFailureEngineClosed) << ready;
    EXPECT_NE(r->body().find("closed the connection before answering"), std::string::npos) << r->body();
  }
}

TEST(AgentProxy, engine_cut_before_the_first_event_is_a_truncated_stream) {
  EchoUpstream up;
  Harness h(up.port, nullptr, "");
  http::Request r{http::Verb::post, "/v1/cut", 11};
  r.body() = "{}";
  r.prepare_payload();
  auto s = run_on(h.ctx, h.client.stream(http::Upstream{"127.0.0.1", h.port, false}, std::move(r)));
  ASSERT_TRUE(s.ok()) << s.error().message;  // the headers went out before the cut
  EXPECT_EQ(s->status(), 200u);
  auto ev = run_on(h.ctx, s->next_event());
  EXPECT_FALSE(ev.ok());  // no fake clean end
}

}  // namespace
}  // namespace cgn::agent
