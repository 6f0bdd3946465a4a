// Loopback integration tests for the HTTP server and client: real sockets on
// 127.0.0.1, port 0, synchronised with latches and conditions, never sleeps.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "core/http/client.h"
#include "core/http/server.h"
#include "testing/process.h"

namespace cgn::http {
namespace {

using namespace std::chrono_literals;
using boost::system::error_code;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// co_spawn needs a default-constructible result; Result is not, so wrap it.
template <class T>
asio::awaitable<std::optional<T>> wrap(asio::awaitable<T> aw) {
  co_return co_await std::move(aw);
}

template <class T>
std::future<std::optional<T>> spawn_future(asio::io_context& ctx, asio::awaitable<T> aw) {
  return asio::co_spawn(ctx, wrap(std::move(aw)), asio::use_future);
}

template <class T>
T run_on(asio::io_context& ctx, asio::awaitable<T> aw) {
  auto fut = spawn_future(ctx, std::move(aw));
  ctx.restart();
  ctx.run();
  return *fut.get();
}

Request make_request(Verb v, std::string target, std::string body = "") {
  Request r{v, target, 11};
  r.body() = std::move(body);
  return r;
}

ServerConfig fast_config() {
  ServerConfig c;
  c.timer_resolution = 10ms;
  return c;
}

struct TestServer {
  explicit TestServer(RouteTable routes, ServerConfig cfg = fast_config())
      : server(std::make_unique<Server>(std::move(cfg), std::move(routes))) {
    auto p = server->start();
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    port = p.ok() ? *p : 0;
  }
  Upstream upstream(bool tls = false) const { return Upstream{"127.0.0.1", port, tls}; }
  std::unique_ptr<Server> server;
  uint16_t port = 0;
};

asio::awaitable<void> ping(Exchange& ex) {
  (void)co_await ex.respond(make_response(200, "pong", "text/plain"));
}
asio::awaitable<void> echo(Exchange& ex) {
  (void)co_await ex.respond(make_response(200, ex.request().body(), "text/plain"));
}

asio::awaitable<void> sse_two(Exchange& ex) {
  (void)co_await ex.begin_sse();
  SseEvent e;
  e.data = "a";
  (void)co_await ex.write_event(e);
  e.data = "[DONE]";
  (void)co_await ex.write_event(e);
}

RouteTable basic_routes() {
  RouteTable rt;
  rt.get("/ping", ping);
  rt.post("/echo", echo);
  return rt;
}

// A blocking loopback socket with a receive timeout, for sending raw bytes.
struct RawConn {
  explicit RawConn(uint16_t port) : sock(ctx) {
    sock.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    timeval tv{5, 0};
    ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void send(std::string_view bytes) { asio::write(sock, asio::buffer(bytes.data(), bytes.size())); }
  // Reads until the server closes; ec tells how the read ended (eof expected).
  std::string read_to_close(error_code& ec) {
    std::string out;
    char buf[4096];
    for (;;) {
      const size_t n = sock.read_some(asio::buffer(buf), ec);
      if (ec) {
        return out;
      }
      out.append(buf, n);
    }
  }
  asio::io_context ctx;
  tcp::socket sock;
};

struct RawResponse {
  int status = 0;
  std::string head;
  std::string body;
};

RawResponse split_response(const std::string& wire) {
  RawResponse r;
  const size_t end = wire.find("\r\n\r\n");
  if (wire.size() < 12 || end == std::string::npos) {
    return r;
  }
  r.status = std::atoi(wire.substr(9, 3).c_str());
  r.head = wire.substr(0, end);
  r.body = wire.substr(end + 4);
  return r;
}

void expect_openai_error(const std::string& body, int status) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << body;
  ASSERT_TRUE(j.contains("error")) << body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(j["error"]["type"].is_string());
  (void)status;
}

// A scripted upstream on a blocking thread, for behaviours our own server never shows.
class RawServer {
 public:
  explicit RawServer(std::function<void(tcp::acceptor&)> script)
      : acceptor_(ctx_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, script = std::move(script)] { script(acceptor_); });
  }
  ~RawServer() {
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);  // wakes a blocked accept()
    thread_.join();
  }
  uint16_t port() const { return port_; }
  static void set_timeout(tcp::socket& s) {
    timeval tv{5, 0};
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  // The next connection with a 5 s receive timeout; nullopt when accept fails (the server is
  // shutting down).
  static std::optional<tcp::socket> accept(tcp::acceptor& acc) {
    error_code ec;
    tcp::socket s = acc.accept(ec);
    if (ec) {
      return std::nullopt;
    }
    set_timeout(s);
    return s;
  }
  // A script that accepts one connection and runs `script` on it.
  static std::function<void(tcp::acceptor&)> one_connection(std::function<void(tcp::socket&)> script) {
    return [script = std::move(script)](tcp::acceptor& acc) {
      if (auto s = accept(acc)) {
        script(*s);
      }
    };
  }
  // Reads a request, answers 200 "first" and reads the next request head (which stays unanswered).
  // False when the first request never came.
  static bool answer_first_then_read_next(tcp::socket& s, std::string& buf) {
    if (!read_head(s, buf)) {
      return false;
    }
    error_code ec;
    asio::write(s, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")), ec);
    read_head(s, buf);
    return true;
  }
  static bool read_head(tcp::socket& s, std::string& buf) {
    error_code ec;
    const size_t n = asio::read_until(s, asio::dynamic_buffer(buf), "\r\n\r\n", ec);
    if (ec) {
      return false;
    }
    buf.erase(0, n);
    return true;
  }

 private:
  asio::io_context ctx_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
};

// ---------------------------------------------------------------------------

TEST(HttpServer, reports_bound_port_for_port_zero) {
  TestServer s(basic_routes());
  ASSERT_NE(s.port, 0);
  EXPECT_EQ(s.server->port(), s.port);
  asio::io_context ctx;
  HttpClient client(ctx);
  auto r = run_on(ctx, client.send(s.upstream(), make_request(Verb::get, "/ping")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->result_int(), 200u);
  EXPECT_EQ(r->body(), "pong");
}

TEST(HttpClient, pool_reuses_one_connection_for_sequential_requests) {
  TestServer s(basic_routes());
  asio::io_context ctx;
  HttpClient client(ctx);
  for (int i = 0; i < 5; ++i) {
    auto r = run_on(ctx, client.send(s.upstream(), make_request(Verb::post, "/echo",
                                                                std::string("n") + std::to_string(i))));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body(), std::string("n") + std::to_string(i));
  }
  EXPECT_EQ(client.connections_opened(), 1u);
  EXPECT_EQ(s.server->connections_accepted(), 1u);
  // Counted after the response write completes, which may be after the client has it.
  EXPECT_TRUE(cgn::testing::wait_until([&] { return s.server->requests_served() == 5u; }, 5000ms));
  EXPECT_EQ(client.idle_connections(s.upstream()), 1u);
}

TEST(HttpClient, replaces_pooled_connection_the_server_closed_while_idle) {
  ServerConfig cfg = fast_config();
  cfg.timeouts.idle = 100ms;
  TestServer s(basic_routes(), cfg);
  asio::io_context ctx;
  HttpClient client(ctx);
  ASSERT_TRUE(run_on(ctx, client.send(s.upstream(), make_request(Verb::get, "/ping"))).ok());
  ASSERT_TRUE(cgn::testing::wait_until([&] { return s.server->open_connections() == 0; }, 5000ms));
  auto r = run_on(ctx, client.send(s.upstream(), make_request(Verb::get, "/ping")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body(), "pong");
  EXPECT_EQ(client.connections_opened(), 2u);
}

TEST(HttpClient, retries_once_when_a_reused_connection_dies_before_answering) {
  RawServer up([](tcp::acceptor& acc) {
    auto s1 = RawServer::accept(acc);
    std::string buf;
    // The second request arrives on the pooled connection...
    if (!s1 || !RawServer::answer_first_then_read_next(*s1, buf)) {
      return;
    }
    s1->close();  // ...and the server drops it without an answer
    auto s2 = RawServer::accept(acc);
    if (!s2) {
      return;
    }
    buf.clear();
    error_code ec;
    if (RawServer::read_head(*s2, buf)) {
      asio::write(*s2, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nretried")), ec);
    }
    RawServer::read_head(*s2, buf);  // until the client closes
  });
  asio::io_context ctx;
  HttpClient client(ctx);
  const Upstream u{"127.0.0.1", up.port()};
  auto first = run_on(ctx, client.send(u, make_request(Verb::get, "/a")));
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->body(), "first");
  auto second = run_on(ctx, client.send(u, make_request(Verb::get, "/b")));
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->body(), "retried");
  EXPECT_EQ(client.connections_opened(), 2u);
  client.close_idle();
}

TEST(HttpClient, a_reused_connection_that_dies_and_a_refused_reconnect_is_a_close_not_a_refusal) {
  // A server that dies of the request: the pooled connection closes, then connects are refused.
  // Reported as a refused connect, a router would take the request to the next node as if it
  // had never been delivered.
  RawServer up([](tcp::acceptor& acc) {
    auto s1 = RawServer::accept(acc);
    std::string buf;
    // The second request arrives on the pooled connection...
    if (!s1 || !RawServer::answer_first_then_read_next(*s1, buf)) {
      return;
    }
    error_code ec;
    acc.close(ec);  // ...the server stops listening...
    s1->close();    // ...and the connection drops without an answer
  });
  asio::io_context ctx;
  HttpClient client(ctx);
  const Upstream u{"127.0.0.1", up.port()};
  auto first = run_on(ctx, client.send(u, make_request(Verb::get, "/a")));
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = run_on(ctx, client.send(u, make_request(Verb::get, "/b")));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, HttpError::closed) << second.error().message;
}

ClientTimeouts with_continue_wait(std::chrono::milliseconds wait) {
  ClientTimeouts t;
  t.continue_wait = wait;
  return t;
}

TEST(HttpClient, continue_wait_sends_the_body_after_the_servers_100_and_reuses_the_connection) {
  TestServer s(basic_routes());
  asio::io_context ctx;
  HttpClient client(ctx);
  for (int i = 0; i < 2; ++i) {
    auto r = run_on(ctx, client.send(s.upstream(), make_request(Verb::post, "/echo", "payload"),
                                     with_continue_wait(2000ms)));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body(), "payload");
  }
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpClient, no_100_within_continue_wait_is_a_failed_connect_and_the_body_never_leaves) {
  // Accepts (as the kernel does for a hung or stopped server) and never answers.
  std::promise<std::string> received;
  RawServer up([&received](tcp::acceptor& acc) {
    auto conn = RawServer::accept(acc);
    if (!conn) {
      received.set_value("");
      return;
    }
    tcp::socket& s = *conn;
    error_code ec;
    std::string all;
    asio::read(s, asio::dynamic_buffer(all), ec);  // until the client gives up and closes
    received.set_value(all);
  });
  asio::io_context ctx;
  ClientConfig cc;
  cc.timer_resolution = 10ms;
  HttpClient client(ctx, cc);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_on(ctx, client.send(Upstream{"127.0.0.1", up.port()},
                                   make_request(Verb::post, "/v1/chat/completions", "SECRET-BODY"),
                                   with_continue_wait(200ms)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, HttpError::connect_failed) << r.error().message;
  EXPECT_NE(r.error().message.find("100 Continue"), std::string::npos) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // not the 60 s header timeout
  auto got = received.get_future();
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  const std::string wire = got.get();
  EXPECT_NE(wire.find("Expect: 100-continue"), std::string::npos) << wire;
  EXPECT_EQ(wire.find("SECRET-BODY"), std::string::npos) << wire;
}

TEST(HttpClient, a_final_answer_instead_of_100_is_the_response_and_its_connection_is_not_pooled) {
  RawServer up(RawServer::one_connection([](tcp::socket& s) {
    error_code ec;
    std::string buf;
    if (RawServer::read_head(s, buf)) {
      asio::write(s, asio::buffer(std::string("HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\nno")),
                  ec);
    }
    RawServer::read_head(s, buf);  // until the client closes
  }));
  asio::io_context ctx;
  HttpClient client(ctx);
  const Upstream u{"127.0.0.1", up.port()};
  auto r = run_on(ctx, client.send(u, make_request(Verb::post, "/x", "body"), with_continue_wait(2000ms)));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->result_int(), 401u);
  EXPECT_EQ(r->body(), "no");
  EXPECT_EQ(client.idle_connections(u), 0u);
}

TEST(HttpClient, without_continue_wait_no_expect_header_goes_out) {
  // A client that sends the body at once must not ask for a 100 it will not wait for: the
  // server's interim answer would be read as the response.
  std::promise<std::string> head;
  RawServer up([&head](tcp::acceptor& acc) {
    auto conn = RawServer::accept(acc);
    if (!conn) {
      head.set_value("");
      return;
    }
    tcp::socket& s = *conn;
    error_code ec;
    std::string buf;
    const size_t n = asio::read_until(s, asio::dynamic_buffer(buf), "\r\n\r\n", ec);
    head.set_value(buf.substr(0, n));
    asio::write(s, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")), ec);
    RawServer::read_head(s, buf);
  });
  asio::io_context ctx;
  HttpClient client(ctx);
  Request req = make_request(Verb::post, "/x", "body");
  req.set(Field::expect, "100-continue");
  auto r = run_on(ctx, client.send(Upstream{"127.0.0.1", up.port()}, std::move(req)));
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto got = head.get_future();
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get().find("Expect"), std::string::npos);
  client.close_idle();
}

TEST(HttpClient, header_timeout_when_server_accepts_but_never_answers) {
  RawServer up(RawServer::one_connection([](tcp::socket& s) {
    std::string buf;
    RawServer::read_head(s, buf);
    RawServer::read_head(s, buf);  // never answers; returns when the client gives up
  }));
  asio::io_context ctx;
  ClientConfig cc;
  cc.timer_resolution = 10ms;
  cc.timeouts.header = 200ms;
  HttpClient client(ctx, cc);
  auto r = run_on(ctx, client.send(Upstream{"127.0.0.1", up.port()}, make_request(Verb::get, "/slow")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, HttpError::timeout) << r.error().message;
  EXPECT_EQ(client.idle_connections(Upstream{"127.0.0.1", up.port()}), 0u);
}

// A client alone on its io_context (a poller, not a server): the first request's connection goes
// back to the pool (leaving the deadline sweeper empty) and the second takes it on the same turn
// of the loop. The second request's header timeout must still be enforced.
TEST(HttpClient, header_timeout_holds_for_a_request_right_after_another_on_a_client_only_context) {
  RawServer up(RawServer::one_connection([](tcp::socket& s) {
    std::string buf;
    if (RawServer::answer_first_then_read_next(s, buf)) {
      RawServer::read_head(s, buf);  // never answers; returns when the client gives up (or in 5 s)
    }
  }));
  asio::io_context ctx;
  ClientConfig cc;
  cc.timer_resolution = 10ms;
  cc.timeouts.header = 200ms;
  HttpClient client(ctx, cc);
  const Upstream u{"127.0.0.1", up.port()};
  const auto t0 = std::chrono::steady_clock::now();
  auto [first, second] =
      run_on(ctx,
             [](HttpClient& c,
                Upstream u) -> asio::awaitable<std::pair<HttpResult<Response>, HttpResult<Response>>> {
               auto a = co_await c.send(u, make_request(Verb::get, "/first"));
               auto b = co_await c.send(u, make_request(Verb::get, "/second"));
               co_return std::make_pair(std::move(a), std::move(b));
             }(client, u));
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->body(), "first");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, HttpError::timeout) << second.error().message;
  // Without the timeout the client waits until the server gives up (5 s), then retries on a fresh
  // connection nobody answers, for ever.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
}

TEST(HttpClient, connect_failure_is_an_error_value) {
  uint16_t dead_port = 0;
  {
    asio::io_context tmp;
    tcp::acceptor a(tmp, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    dead_port = a.local_endpoint().port();
  }
  asio::io_context ctx;
  HttpClient client(ctx);
  auto r = run_on(ctx, client.send(Upstream{"127.0.0.1", dead_port}, make_request(Verb::get, "/")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, HttpError::connect_failed) << r.error().message;
}

// ---------------------------------------------------------------------------
// SSE

struct Lockstep {
  std::mutex mu;
  std::condition_variable cv;
  int received = 0;
  bool server_gave_up = false;
};

asio::awaitable<void> lockstep_stream(std::shared_ptr<Lockstep> st, Exchange& ex) {
  if (!co_await ex.begin_sse()) {
    co_return;
  }
  for (int k = 0; k < 5; ++k) {
    SseEvent e;
    e.data = std::to_string(k);
    if (!co_await ex.write_event(e)) {
      co_return;
    }
    std::string comment;
    append_sse_comment(comment, "keep-alive");
    if (!co_await ex.write(comment)) {
      co_return;
    }
    // Event k must reach the client before event k+1 is written. The client
    // runs on another thread, so blocking this worker here is safe.
    std::unique_lock lock(st->mu);
    if (!st->cv.wait_for(lock, 5s, [&] { return st->received > k; })) {
      st->server_gave_up = true;
      co_return;
    }
  }
  SseEvent done;
  done.data = "[DONE]";
  (void)co_await ex.write_event(done);
  (void)co_await ex.end_stream();
}

asio::awaitable<HttpResult<std::vector<std::string>>> read_events(HttpClient& client, Upstream up,
                                                                  std::string target,
                                                                  std::shared_ptr<Lockstep> st) {
  auto s = co_await client.stream(up, make_request(Verb::get, target));
  if (!s) {
    co_return s.error();
  }
  std::vector<std::string> got;
  for (;;) {
    auto ev = co_await s->next_event();
    if (!ev) {
      co_return ev.error();
    }
    if (!ev->has_value()) {
      break;
    }
    got.push_back((*ev)->data);
    if (st) {
      std::lock_guard lock(st->mu);
      ++st->received;
      st->cv.notify_all();
    }
  }
  co_return got;
}

TEST(HttpSse, each_event_is_flushed_before_the_next_is_written) {
  auto st = std::make_shared<Lockstep>();
  RouteTable rt;
  rt.get("/stream", [st](Exchange& ex) { return lockstep_stream(st, ex); });
  TestServer s(std::move(rt));
  asio::io_context ctx;
  HttpClient client(ctx);
  auto r = run_on(ctx, read_events(client, s.upstream(), "/stream", st));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, (std::vector<std::string>{"0", "1", "2", "3", "4", "[DONE]"}));  // comments skipped
  EXPECT_FALSE(st->server_gave_up);
  // The stream ended cleanly, so its connection went back to the pool.
  EXPECT_EQ(client.idle_connections(s.upstream()), 1u);
}

struct DisconnectSeen {
  std::promise<std::pair<bool, bool>> result;  // (wait was cancelled, client_open() afterwards)
};

asio::awaitable<void> stream_until_cancelled(std::shared_ptr<DisconnectSeen> st, Exchange& ex) {
  (void)co_await ex.begin_sse();
  SseEvent e;
  e.data = "hello";
  (void)co_await ex.write_event(e);
  asio::steady_timer t(co_await asio::this_coro::executor, 30s);
  auto [ec] = co_await t.async_wait(use_tuple);
  st->result.set_value({ec == asio::error::operation_aborted, ex.client_open()});
}

asio::awaitable<HttpStatus> read_one_then_leave(HttpClient& client, Upstream up) {
  auto s = co_await client.stream(up, make_request(Verb::get, "/stream"));
  if (!s) {
    co_return s.error();
  }
  auto ev = co_await s->next_event();
  if (!ev) {
    co_return ev.error();
  }
  co_return Ok{};  // the stream (and its connection) is destroyed here
}

TEST(HttpSse, streaming_handler_learns_that_the_client_disconnected) {
  auto st = std::make_shared<DisconnectSeen>();
  auto seen = st->result.get_future();
  RouteTable rt;
  rt.get("/stream", [st](Exchange& ex) { return stream_until_cancelled(st, ex); });
  TestServer s(std::move(rt));
  asio::io_context ctx;
  HttpClient client(ctx);
  ASSERT_TRUE(run_on(ctx, read_one_then_leave(client, s.upstream())).ok());
  ASSERT_EQ(seen.wait_for(10s), std::future_status::ready);
  const auto [cancelled, open] = seen.get();
  EXPECT_TRUE(cancelled);
  EXPECT_FALSE(open);
}

// The router's case: a handler proxying an upstream stream is cancelled when
// its client leaves, which cancels the upstream read and closes that connection.
struct ProxyState {
  HttpClient* client = nullptr;
  Upstream upstream;
  std::promise<HttpError> proxy_saw;
};

asio::awaitable<void> proxy_stream(std::shared_ptr<ProxyState> st, Exchange& ex) {
  auto up = co_await st->client->stream(st->upstream, make_request(Verb::get, "/stream"));
  if (!up) {
    (void)co_await ex.respond_error(bad_gateway(up.error().message));
    co_return;
  }
  (void)co_await ex.begin_sse();
  for (;;) {
    auto ev = co_await up->next_event();
    if (!ev) {
      st->proxy_saw.set_value(ev.error().code);
      co_return;
    }
    if (!ev->has_value()) {
      break;
    }
    (void)co_await ex.write_event(**ev);
  }
  st->proxy_saw.set_value(HttpError::invalid_state);  // upstream ended: not expected here
}

TEST(HttpSse, client_disconnect_cancels_the_proxied_upstream_request) {
  auto upstream_state = std::make_shared<DisconnectSeen>();
  auto upstream_seen = upstream_state->result.get_future();
  RouteTable urt;
  urt.get("/stream", [upstream_state](Exchange& ex) { return stream_until_cancelled(upstream_state, ex); });
  TestServer upstream(std::move(urt));

  auto ps = std::make_shared<ProxyState>();
  auto proxy_seen = ps->proxy_saw.get_future();
  RouteTable prt;
  prt.get("/stream", [ps](Exchange& ex) { return proxy_stream(ps, ex); });
  auto proxy = std::make_unique<Server>(fast_config(), std::move(prt));
  HttpClient proxy_client(proxy->worker_context(0));  // per-worker client, used on that worker only
  ps->client = &proxy_client;
  ps->upstream = upstream.upstream();
  auto port = proxy->start();
  ASSERT_TRUE(port.ok());

  asio::io_context ctx;
  HttpClient client(ctx);
  ASSERT_TRUE(run_on(ctx, read_one_then_leave(client, Upstream{"127.0.0.1", *port})).ok());
  ASSERT_EQ(proxy_seen.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(proxy_seen.get(), HttpError::cancelled);
  ASSERT_EQ(upstream_seen.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(upstream_seen.get().first);
  proxy->stop(1s);
}

// ---------------------------------------------------------------------------
// Errors and limits

TEST(HttpServer, unknown_path_is_404_and_wrong_method_is_405_as_openai_json) {
  TestServer s(basic_routes());
  asio::io_context ctx;
  HttpClient client(ctx);
  auto nf = run_on(ctx, client.send(s.upstream(), make_request(Verb::get, "/nope")));
  ASSERT_TRUE(nf.ok());
  EXPECT_EQ(nf->result_int(), 404u);
  expect_openai_error(nf->body(), 404);
  auto na = run_on(ctx, client.send(s.upstream(), make_request(Verb::post, "/ping", "x")));
  ASSERT_TRUE(na.ok());
  EXPECT_EQ(na->result_int(), 405u);
  EXPECT_EQ((*na)[Field::allow], "GET");
  expect_openai_error(na->body(), 405);
  // Errors keep the connection: both went over one.
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpServer, oversized_body_is_413_before_the_body_is_read) {
  ServerConfig cfg = fast_config();
  cfg.limits.max_body_bytes = 1024;
  TestServer s(basic_routes(), cfg);
  RawConn c(s.port);
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n");
  error_code ec;
  const auto r = split_response(c.read_to_close(ec));
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_EQ(r.status, 413);
  expect_openai_error(r.body, 413);
}

TEST(HttpServer, oversized_headers_are_431) {
  ServerConfig cfg = fast_config();
  cfg.limits.max_header_bytes = 1024;
  TestServer s(basic_routes(), cfg);
  RawConn c(s.port);
  c.send(std::string("GET /ping HTTP/1.1\r\nX-Big: ") + std::string(4000, 'a') + "\r\n\r\n");
  error_code ec;
  const auto r = split_response(c.read_to_close(ec));
  EXPECT_EQ(r.status, 431);
  expect_openai_error(r.body, 431);
}

TEST(HttpServer, malformed_request_is_400) {
  TestServer s(basic_routes());
  RawConn c(s.port);
  c.send("THIS IS NOT HTTP\r\n\r\n");
  error_code ec;
  const auto r = split_response(c.read_to_close(ec));
  EXPECT_EQ(r.status, 400);
  expect_openai_error(r.body, 400);
}

TEST(HttpServer, unknown_transfer_encoding_is_501_and_what_follows_never_runs) {
  std::atomic<int> echoed{0};
  RouteTable rt;
  rt.post("/echo", [&echoed](Exchange& ex) -> asio::awaitable<void> {
    echoed.fetch_add(1);
    (void)co_await ex.respond(make_response(200, ex.request().body(), "text/plain"));
  });
  TestServer s(std::move(rt));
  RawConn c(s.port);
  // Read as an empty body, the bytes after the header would run as a second request.
  c.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\nsmuggled");
  error_code ec;
  const std::string all = c.read_to_close(ec);
  EXPECT_EQ(ec, asio::error::eof);  // the server closed the connection
  const auto r = split_response(all);
  EXPECT_EQ(r.status, 501);
  expect_openai_error(r.body, 501);
  EXPECT_EQ(all.find("smuggled"), std::string::npos) << all;
  EXPECT_EQ(all.find("HTTP/1.1", 1), std::string::npos) << all;  // one response only
  EXPECT_EQ(echoed.load(), 0);
}

TEST(HttpServer, http11_request_without_a_host_or_with_two_is_400) {
  for (std::string head :
       {"GET /ping HTTP/1.1\r\n\r\n", "GET /ping HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"}) {
    TestServer s(basic_routes());
    RawConn c(s.port);
    c.send(head);
    error_code ec;
    const auto r = split_response(c.read_to_close(ec));
    EXPECT_EQ(r.status, 400) << head;
    expect_openai_error(r.body, 400);
    EXPECT_NE(r.body.find("Host"), std::string::npos) << r.body;
  }
}

TEST(HttpServer, slow_headers_are_cut_by_the_header_timeout) {
  ServerConfig cfg = fast_config();
  cfg.timeouts.header = 200ms;
  TestServer s(basic_routes(), cfg);
  RawConn c(s.port);
  c.send("GET /ping HTTP/1.1\r\nHost: x\r\n");  // never finishes the headers
  error_code ec;
  const std::string got = c.read_to_close(ec);
  EXPECT_EQ(ec, asio::error::eof);  // closed by the server, not our 5 s receive timeout
  EXPECT_TRUE(got.empty());
}

TEST(HttpServer, idle_keep_alive_connection_is_closed) {
  ServerConfig cfg = fast_config();
  cfg.timeouts.idle = 200ms;
  TestServer s(basic_routes(), cfg);
  RawConn c(s.port);
  c.send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  error_code ec;
  const auto r = split_response(c.read_to_close(ec));
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "pong");
}

TEST(HttpServer, pipelined_requests_are_answered_in_order) {
  TestServer s(basic_routes());
  RawConn c(s.port);
  c.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nA"
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nB"
      "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  error_code ec;
  const std::string all = c.read_to_close(ec);
  const size_t a = all.find("\r\n\r\nA");
  const size_t b = all.find("\r\n\r\nB");
  const size_t p = all.find("pong");
  ASSERT_NE(a, std::string::npos) << all;
  ASSERT_NE(b, std::string::npos) << all;
  ASSERT_NE(p, std::string::npos) << all;
  EXPECT_LT(a, b);
  EXPECT_LT(b, p);
}

asio::awaitable<void> no_answer(Exchange&) {
  co_return;
}

TEST(HttpServer, handler_that_does_not_answer_gets_500) {
  RouteTable rt;
  rt.get("/silent", no_answer);
  TestServer s(std::move(rt));
  asio::io_context ctx;
  HttpClient client(ctx);
  auto r = run_on(ctx, client.send(s.upstream(), make_request(Verb::get, "/silent")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->result_int(), 500u);
  expect_openai_error(r->body(), 500);
}

TEST(HttpServer, expect_100_continue_is_answered_before_the_body) {
  TestServer s(basic_routes());
  RawConn c(s.port);
  c.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\nConnection: "
      "close\r\n\r\n");
  std::string interim;
  error_code ec;
  asio::read_until(c.sock, asio::dynamic_buffer(interim), "\r\n\r\n", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(interim.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << interim;
  c.send("body");
  const auto r = split_response(c.read_to_close(ec));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "body");
}

TEST(HttpServer, incomplete_body_is_cut_by_the_body_timeout) {
  ServerConfig cfg = fast_config();
  cfg.timeouts.body = 200ms;
  TestServer s(basic_routes(), cfg);
  RawConn c(s.port);
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab");  // 8 bytes never come
  error_code ec;
  const std::string got = c.read_to_close(ec);
  EXPECT_EQ(ec, asio::error::eof);  // closed by the server, not our 5 s receive timeout
  EXPECT_TRUE(got.empty());
}

TEST(HttpServer, http10_stream_is_delimited_by_close) {
  RouteTable rt;
  rt.get("/stream", sse_two);
  TestServer s(std::move(rt));
  RawConn c(s.port);
  c.send("GET /stream HTTP/1.0\r\n\r\n");
  error_code ec;
  const auto r = split_response(c.read_to_close(ec));
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.head.find("chunked"), std::string::npos) << r.head;
  EXPECT_EQ(r.body, "data: a\n\ndata: [DONE]\n\n");
}

TEST(HttpServer, head_runs_get_and_sends_headers_only) {
  TestServer s(basic_routes());
  RawConn c(s.port);
  c.send("HEAD /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  error_code ec;
  const std::string all = c.read_to_close(ec);
  const size_t second = all.find("HTTP/1.1 200", 1);
  ASSERT_EQ(all.rfind("HTTP/1.1 200", 0), 0u) << all;
  ASSERT_NE(second, std::string::npos) << all;
  const std::string head_response = all.substr(0, second);
  EXPECT_NE(head_response.find("Content-Length: 4"), std::string::npos) << head_response;
  EXPECT_EQ(head_response.find("pong"), std::string::npos);  // no body after HEAD
  EXPECT_EQ(all.substr(all.size() - 4), "pong");
}

TEST(HttpServer, unregistered_metrics_path_is_404) {
  TestServer s(basic_routes());
  asio::io_context ctx;
  HttpClient client(ctx);
  auto r = run_on(ctx, client.send(s.upstream(), make_request(Verb::options, "/metrics")));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result_int(), 404u);
}

asio::awaitable<void> big_body(Exchange& ex) {
  (void)co_await ex.respond(make_response(200, std::string(10000, 'x'), "text/plain"));
}

TEST(HttpClient, response_over_the_body_limit_is_too_large) {
  RouteTable rt;
  rt.get("/big", big_body);
  TestServer s(std::move(rt));
  asio::io_context ctx;
  ClientConfig cc;
  cc.max_body_bytes = 1000;
  HttpClient client(ctx, cc);
  auto r = run_on(ctx, client.send(s.upstream(), make_request(Verb::get, "/big")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, HttpError::too_large);
  EXPECT_EQ(client.idle_connections(s.upstream()), 0u);  // an unread body never goes back to the pool
}

asio::awaitable<HttpResult<int>> count_events_until_error(HttpClient& client, Upstream up, ClientTimeouts t) {
  auto s = co_await client.stream(up, make_request(Verb::get, "/stream"), t);
  if (!s) {
    co_return s.error();
  }
  int n = 0;
  for (;;) {
    auto ev = co_await s->next_event();
    if (!ev) {
      co_return ev.error();
    }
    if (!ev->has_value()) {
      co_return n;
    }
    ++n;
  }
}

TEST(HttpClient, idle_timeout_when_a_stream_stalls) {
  auto st = std::make_shared<DisconnectSeen>();
  RouteTable rt;
  rt.get("/stream", [st](Exchange& ex) { return stream_until_cancelled(st, ex); });
  TestServer s(std::move(rt));
  asio::io_context ctx;
  ClientConfig cc;
  cc.timer_resolution = 10ms;
  HttpClient client(ctx, cc);
  ClientTimeouts t;
  t.idle = 200ms;
  auto r = run_on(ctx, count_events_until_error(client, s.upstream(), t));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, HttpError::timeout) << r.error().message;
}

// ---------------------------------------------------------------------------
// CORS on /metrics

TEST(HttpServer, metrics_answers_cors_preflight_and_sets_allow_origin) {
  RouteTable rt;
  rt.get("/metrics", metrics_handler([] { return std::string("cgn_up 1\n"); }));  // CORS on by default
  TestServer s(std::move(rt));
  asio::io_context ctx;
  HttpClient client(ctx);
  Request pre = make_request(Verb::options, "/metrics");
  pre.set(Field::origin, "http://dashboard.local");
  pre.set(Field::access_control_request_method, "GET");
  pre.set(Field::access_control_request_headers, "x-requested-with");
  auto r = run_on(ctx, client.send(s.upstream(), std::move(pre)));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->result_int(), 204u);
  EXPECT_EQ((*r)[Field::access_control_allow_origin], "*");
  const std::string methods((*r)["Access-Control-Allow-Methods"]);
  EXPECT_NE(methods.find("GET"), std::string::npos);
  EXPECT_NE(methods.find("OPTIONS"), std::string::npos);
  EXPECT_EQ((*r)["Access-Control-Allow-Headers"], "x-requested-with");

  auto g = run_on(ctx, client.send(s.upstream(), make_request(Verb::get, "/metrics")));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->result_int(), 200u);
  EXPECT_EQ((*g)[Field::access_control_allow_origin], "*");
  EXPECT_EQ(g->body(), "cgn_up 1\n");
}

// ---------------------------------------------------------------------------
// Graceful shutdown

struct ShutdownState {
  std::atomic<int> streams_started{0};
  std::promise<bool> endless_cancelled;
};

asio::awaitable<void> finishes_when_draining(std::shared_ptr<ShutdownState> st, Exchange& ex) {
  (void)co_await ex.begin_sse();
  SseEvent e;
  e.data = "first";
  (void)co_await ex.write_event(e);
  st->streams_started.fetch_add(1);
  asio::steady_timer poll(co_await asio::this_coro::executor);
  while (!ex.draining()) {  // a stream that ends soon after shutdown begins
    poll.expires_after(5ms);
    (void)co_await poll.async_wait(use_tuple);
  }
  e.data = "last";
  (void)co_await ex.write_event(e);
  (void)co_await ex.end_stream();
}

asio::awaitable<void> never_finishes(std::shared_ptr<ShutdownState> st, Exchange& ex) {
  (void)co_await ex.begin_sse();
  SseEvent e;
  e.data = "first";
  (void)co_await ex.write_event(e);
  st->streams_started.fetch_add(1);
  asio::steady_timer t(co_await asio::this_coro::executor, 60s);
  auto [ec] = co_await t.async_wait(use_tuple);
  st->endless_cancelled.set_value(ec == asio::error::operation_aborted);
}

TEST(HttpServer, graceful_stop_drains_a_finishing_stream_and_cuts_an_endless_one) {
  auto st = std::make_shared<ShutdownState>();
  auto endless_cancelled = st->endless_cancelled.get_future();
  RouteTable rt;
  rt.get("/finishing", [st](Exchange& ex) { return finishes_when_draining(st, ex); });
  rt.get("/endless", [st](Exchange& ex) { return never_finishes(st, ex); });
  ServerConfig cfg = fast_config();
  cfg.threads = 2;
  TestServer s(std::move(rt), cfg);

  asio::io_context ctx;
  HttpClient client(ctx);
  auto finishing = spawn_future(ctx, read_events(client, s.upstream(), "/finishing", nullptr));
  auto endless = spawn_future(ctx, read_events(client, s.upstream(), "/endless", nullptr));
  std::thread client_thread([&] { ctx.run(); });
  ASSERT_TRUE(cgn::testing::wait_until([&] { return st->streams_started.load() == 2; }, 10000ms));

  s.server->stop(500ms);
  client_thread.join();

  auto f = *finishing.get();
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(*f, (std::vector<std::string>{"first", "last"}));
  auto e = *endless.get();
  EXPECT_FALSE(e.ok());  // cut without the terminating chunk
  ASSERT_EQ(endless_cancelled.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(endless_cancelled.get());
  EXPECT_EQ(s.server->open_connections(), 0u);

  // No longer accepting.
  asio::io_context ctx2;
  HttpClient late(ctx2);
  auto r = run_on(ctx2, late.send(s.upstream(), make_request(Verb::get, "/finishing")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, HttpError::connect_failed);
}

// ---------------------------------------------------------------------------
// Threads

asio::awaitable<void> which_worker(Exchange& ex) {
  (void)co_await ex.respond(make_response(200, std::to_string(ex.worker_index()), "text/plain"));
}

TEST(HttpServer, connections_are_spread_over_worker_threads) {
  RouteTable rt;
  rt.get("/worker", which_worker);
  ServerConfig cfg = fast_config();
  cfg.threads = 4;
  TestServer s(std::move(rt), cfg);
  std::mutex mu;
  std::set<std::string> workers;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      asio::io_context ctx;
      HttpClient client(ctx);
      for (int i = 0; i < 50; ++i) {
        auto r = run_on(ctx, client.send(s.upstream(), make_request(Verb::get, "/worker")));
        if (r.ok() && r->result_int() == 200) {
          ok.fetch_add(1);
          std::lock_guard lock(mu);
          workers.insert(r->body());
        }
      }
    });
  }
  for (auto& t : clients) {
    t.join();
  }
  EXPECT_EQ(ok.load(), 200);
  EXPECT_EQ(s.server->connections_accepted(), 4u);
  EXPECT_EQ(workers, (std::set<std::string>{"0", "1", "2", "3"}));  // round-robin hand-off
}

// ---------------------------------------------------------------------------
// TLS

struct Cert {
  cgn::testing::TempDir dir;
  std::string cert = dir.file("cert.pem");
  std::string key = dir.file("key.pem");
  bool ok = false;
  Cert() {
    const std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + key +
        " -out " + cert +
        " -days 1 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost"
        " >/dev/null 2>&1";
    ok = std::system(cmd.c_str()) == 0;
  }
};

TEST(HttpTls, listener_serves_requests_and_streams_over_tls) {
  Cert cert;
  ASSERT_TRUE(cert.ok) << "openssl req failed";
  RouteTable rt = basic_routes();
  rt.get("/stream", sse_two);
  ServerConfig cfg = fast_config();
  cfg.tls_cert_file = cert.cert;
  cfg.tls_key_file = cert.key;
  TestServer s(std::move(rt), cfg);
  ASSERT_NE(s.port, 0);

  asio::io_context ctx;
  ClientConfig cc;
  cc.tls_ca_file = cert.cert;
  HttpClient client(ctx, cc);
  for (int i = 0; i < 2; ++i) {
    auto r = run_on(ctx, client.send(s.upstream(true), make_request(Verb::post, "/echo", "secret")));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body(), "secret");
  }
  auto events = run_on(ctx, read_events(client, s.upstream(true), "/stream", nullptr));
  ASSERT_TRUE(events.ok()) << events.error().message;
  EXPECT_EQ(*events, (std::vector<std::string>{"a", "[DONE]"}));
  EXPECT_EQ(client.connections_opened(), 1u);

  // A client that does not trust the certificate refuses the connection.
  asio::io_context ctx2;
  HttpClient strict(ctx2);
  auto bad = run_on(ctx2, strict.send(s.upstream(true), make_request(Verb::get, "/ping")));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, HttpError::tls) << bad.error().message;
}

TEST(HttpTls, missing_certificate_is_an_error_value) {
  ServerConfig cfg = fast_config();
  cfg.tls_cert_file = "/nonexistent/cert.pem";
  cfg.tls_key_file = "/nonexistent/key.pem";
  Server s(cfg, basic_routes());
  auto r = s.start();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, HttpError::tls);
}

// ---------------------------------------------------------------------------
// Deferred stream start (begin_stream_deferred) and reads that take every chunk already received

struct DeferGate {
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;  // the handler is past its first step
  bool go = false;       // the test has looked at its socket
};

// flush_first: write({}) right after begin_stream_deferred(), which sends the headers alone.
asio::awaitable<void> deferred_stream(std::shared_ptr<DeferGate> g, bool flush_first, Exchange& ex) {
  Fields h;
  h.set(Field::content_type, "text/plain");
  if (!ex.begin_stream_deferred(200, std::move(h))) {
    co_return;
  }
  if (flush_first && !co_await ex.write({})) {
    co_return;
  }
  {
    std::unique_lock lock(g->mu);
    g->started = true;
    g->cv.notify_all();
    // The client is the test's thread, so blocking this worker is safe.
    if (!g->cv.wait_for(lock, 5s, [&] { return g->go; })) {
      co_return;
    }
  }
  if (!co_await ex.write("abc")) {
    co_return;
  }
  (void)co_await ex.end_stream("de");
}

// Sends `request`, waits for the handler's first step, and returns whether any response byte
// was waiting in the socket then (on loopback a written segment is queued before write returns);
// then lets the handler finish and reads the whole answer into `wire`.
bool bytes_waiting_after_first_step(bool flush_first, const std::string& request, std::string& wire) {
  auto g = std::make_shared<DeferGate>();
  RouteTable rt;
  rt.get("/d", [g, flush_first](Exchange& ex) { return deferred_stream(g, flush_first, ex); });
  TestServer s(std::move(rt));
  RawConn c(s.port);
  c.send(request);
  {
    std::unique_lock lock(g->mu);
    EXPECT_TRUE(g->cv.wait_for(lock, 5s, [&] { return g->started; }));
  }
  char byte;
  const bool waiting = ::recv(c.sock.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  {
    std::lock_guard lock(g->mu);
    g->go = true;
    g->cv.notify_all();
  }
  error_code ec;
  wire = c.read_to_close(ec);
  return waiting;
}

TEST(HttpServer, deferred_stream_sends_its_headers_with_the_first_bytes) {
  std::string wire;
  EXPECT_FALSE(
      bytes_waiting_after_first_step(false, "GET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", wire));
  const auto r = split_response(wire);
  EXPECT_EQ(r.status, 200) << wire;
  EXPECT_NE(r.head.find("Transfer-Encoding: chunked"), std::string::npos) << r.head;
  EXPECT_EQ(r.body, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
}

TEST(HttpServer, deferred_stream_headers_go_alone_on_an_empty_write) {
  std::string wire;
  EXPECT_TRUE(
      bytes_waiting_after_first_step(true, "GET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", wire));
  EXPECT_EQ(split_response(wire).body, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
}

TEST(HttpServer, deferred_stream_answers_head_and_http10) {
  std::string wire;
  (void)bytes_waiting_after_first_step(false, "HEAD /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                       wire);
  auto r = split_response(wire);
  EXPECT_EQ(r.status, 200) << wire;
  EXPECT_EQ(r.body, "");  // headers only
  (void)bytes_waiting_after_first_step(false, "GET /d HTTP/1.0\r\n\r\n", wire);
  r = split_response(wire);
  EXPECT_EQ(r.status, 200) << wire;
  EXPECT_EQ(r.head.find("chunked"), std::string::npos) << r.head;
  EXPECT_EQ(r.body, "abcde");  // delimited by close
}

// The first read_some() of a streamed GET, and whether the body was complete after it.
asio::awaitable<HttpResult<std::pair<std::string, bool>>> first_piece(HttpClient& client, Upstream u) {
  auto s = co_await client.stream(u, make_request(Verb::get, "/"));
  if (!s) {
    co_return s.error();
  }
  auto p = co_await s->read_some();
  if (!p) {
    co_return p.error();
  }
  co_return std::pair<std::string, bool>{std::string(*p), s->done()};
}

TEST(HttpClient, read_some_returns_every_chunk_already_received_in_one_piece) {
  // Two 1000-byte chunks and the end, written at once: more than Beast's 512-byte default read.
  const std::string a(1000, 'a');
  const std::string b(1000, 'b');
  RawServer up(RawServer::one_connection([&](tcp::socket& s) {
    error_code ec;
    std::string buf;
    if (!RawServer::read_head(s, buf)) {
      return;
    }
    const std::string wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + a +
                             "\r\n3e8\r\n" + b + "\r\n0\r\n\r\n";
    asio::write(s, asio::buffer(wire), ec);
    RawServer::read_head(s, buf);  // until the client closes
  }));
  asio::io_context ctx;
  HttpClient client(ctx);
  const Upstream u{"127.0.0.1", up.port()};
  auto piece = run_on(ctx, first_piece(client, u));
  ASSERT_TRUE(piece.ok()) << piece.error().message;
  EXPECT_EQ(piece->first, a + b);
  EXPECT_TRUE(piece->second);                 // the end came in the same piece
  EXPECT_EQ(client.idle_connections(u), 1u);  // the body ended cleanly: pooled
  client.close_idle();
}

// ---- intake: the header check and the server's caps -----------------------------------------

// A header check that wants "Authorization: Bearer ok", and a route that counts what reached it.
struct CheckedServer {
  explicit CheckedServer(ServerConfig cfg = fast_config()) {
    cfg.header_check = [this](const Request& head, std::string_view remote) -> std::optional<Response> {
      checks.fetch_add(1);
      last_remote = std::string(remote);
      if (head[Field::authorization] == "Bearer ok") {
        return std::nullopt;
      }
      return make_error_response(unauthorized("no key"));
    };
    cfg.on_cap_rejected = [this](std::string_view reason, std::string_view) {
      std::lock_guard lock(mu);
      rejected.emplace_back(reason);
    };
    RouteTable rt;
    rt.post("/echo", [this](Exchange& ex) -> asio::awaitable<void> {
      handled.fetch_add(1);
      (void)co_await ex.respond(make_response(200, ex.request().body(), "text/plain"));
    });
    server = std::make_unique<TestServer>(std::move(rt), std::move(cfg));
  }
  std::vector<std::string> rejections() {
    std::lock_guard lock(mu);
    return rejected;
  }
  std::atomic<int> checks{0};
  std::atomic<int> handled{0};
  std::string last_remote;
  std::mutex mu;
  std::vector<std::string> rejected;
  std::unique_ptr<TestServer> server;
};

TEST(HttpServer, header_check_refuses_before_the_body_and_without_100_continue) {
  CheckedServer s;
  {
    // 8 MiB announced, 100-continue asked for: the refusal comes instead, and nothing more is read.
    RawConn c(s.server->port);
    c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\nExpect: 100-continue\r\n\r\n");
    error_code ec;
    const std::string wire = c.read_to_close(ec);
    EXPECT_EQ(ec, asio::error::eof);
    EXPECT_EQ(wire.find("100 Continue"), std::string::npos) << wire;
    const auto r = split_response(wire);
    EXPECT_EQ(r.status, 401);
    expect_openai_error(r.body, 401);
    EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << r.head;
  }
  {
    // No Expect: the client starts sending its body at once; the answer does not wait for it.
    RawConn c(s.server->port);
    c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n" + std::string(4096, 'x'));
    error_code ec;
    EXPECT_EQ(split_response(c.read_to_close(ec)).status, 401);
  }
  EXPECT_EQ(s.handled.load(), 0);
  EXPECT_EQ(s.checks.load(), 2);
  EXPECT_TRUE(s.last_remote.starts_with("127.0.0.1:")) << s.last_remote;
  // With the key the same request goes through, once per request on a keep-alive connection.
  asio::io_context ctx;
  HttpClient client(ctx);
  for (int i = 0; i < 2; ++i) {
    Request req = make_request(Verb::post, "/echo", "hello");
    req.set(Field::authorization, "Bearer ok");
    auto res = run_on(ctx, client.send(s.server->upstream(), std::move(req)));
    ASSERT_TRUE(res.ok()) << res.error().message;
    EXPECT_EQ(res->result_int(), 200u);
    EXPECT_EQ(res->body(), "hello");
  }
  EXPECT_EQ(s.checks.load(), 4);
  EXPECT_EQ(s.handled.load(), 2);
}

TEST(HttpServer, a_connection_over_max_connections_gets_503_and_the_observer_hears_of_it) {
  ServerConfig cfg = fast_config();
  cfg.limits.max_connections = 1;
  CheckedServer s(cfg);
  RawConn first(s.server->port);
  // The first connection is open (answered, kept alive) before the second arrives.
  first.send("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nContent-Length: 2\r\n\r\nhi");
  std::string got;
  error_code ec;
  asio::read_until(first.sock, asio::dynamic_buffer(got), "hi", ec);
  ASSERT_FALSE(ec) << ec.message();
  RawConn second(s.server->port);
  second.send("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nContent-Length: 2\r\n\r\nhi");
  const auto r = split_response(second.read_to_close(ec));
  EXPECT_EQ(r.status, 503);
  expect_openai_error(r.body, 503);
  EXPECT_NE(r.body.find("server_busy"), std::string::npos) << r.body;
  EXPECT_EQ(s.rejections(), std::vector<std::string>{"connections"});
  EXPECT_EQ(s.handled.load(), 1);
}

TEST(HttpServer, bodies_over_max_buffered_bytes_get_503_before_they_are_read) {
  ServerConfig cfg = fast_config();
  cfg.limits.max_buffered_bytes = 1000;
  CheckedServer s(cfg);
  const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\n";
  {
    RawConn c(s.server->port);
    c.send(head + "Content-Length: 2000\r\n\r\n");
    error_code ec;
    EXPECT_EQ(split_response(c.read_to_close(ec)).status, 503);
  }
  // A body still arriving holds its share: the next one that does not fit beside it is refused,
  // and the share comes back when its request is done.
  RawConn holder(s.server->port);
  holder.send(head + "Content-Length: 800\r\n\r\n" + std::string(100, 'a'));
  EXPECT_TRUE(cgn::testing::wait_until([&] { return s.checks.load() == 2; }, 10s));
  {
    RawConn c(s.server->port);
    c.send(head + "Content-Length: 500\r\nConnection: close\r\n\r\n" + std::string(500, 'b'));
    error_code ec;
    EXPECT_EQ(split_response(c.read_to_close(ec)).status, 503);
  }
  holder.send(std::string(700, 'a'));
  std::string got;
  error_code ec;
  asio::read_until(holder.sock, asio::dynamic_buffer(got), std::string(800, 'a'), ec);
  ASSERT_FALSE(ec) << ec.message();
  {
    RawConn c(s.server->port);
    c.send(head + "Content-Length: 500\r\nConnection: close\r\n\r\n" + std::string(500, 'b'));
    EXPECT_EQ(split_response(c.read_to_close(ec)).status, 200);
  }
  // Chunked bodies count as they grow.
  {
    RawConn c(s.server->port);
    c.send(head + "Transfer-Encoding: chunked\r\n\r\n4b0\r\n" + std::string(1200, 'c') + "\r\n0\r\n\r\n");
    EXPECT_EQ(split_response(c.read_to_close(ec)).status, 503);
  }
  EXPECT_EQ(s.rejections(), (std::vector<std::string>{"buffered_bytes", "buffered_bytes", "buffered_bytes"}));
  EXPECT_EQ(s.handled.load(), 2);
}

}  // namespace
}  // namespace cgn::http
