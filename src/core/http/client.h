// The HTTP/1.1 client: C++20 coroutines over Asio/Beast with a keep-alive
// connection pool per upstream (host:port[:tls]), connect/header/body/idle
// timeouts, cancellation, and streaming responses (raw body pieces or SSE
// events as they arrive). Errors come back as values (HttpResult).
//
// Ownership and threads: an HttpClient belongs to one io_context and must be
// used only from the thread running it (give each server worker its own client:
// no locks on the hot path). Its coroutines run inside the caller's coroutine,
// so cancelling the caller (e.g. the server cancelling a handler whose client
// went away) cancels the pending connect/read/write; the connection is then
// closed, never pooled. The client must outlive every ClientStream it returns.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/http/sse.h"
#include "core/http/types.h"

namespace cgn::http {

namespace asio = boost::asio;
using std::chrono::milliseconds;

struct Upstream {
  std::string host;  // IP literal (no DNS) or a name (resolved per new connection)
  uint16_t port = 0;
  bool tls = false;
  std::string key() const;  // pool key "host:port" (+ ":tls")
};

struct ClientTimeouts {
  milliseconds connect{3'000};  // TCP connect + TLS handshake
  milliseconds header{60'000};  // request written and response headers received
  milliseconds body{300'000};   // whole body of a buffered (send()) response
  milliseconds idle{60'000};    // longest gap between two pieces of a streamed body
  // > 0: a request with a body goes with "Expect: 100-continue" and its body only after the
  // server's "100 Continue". A server that sends neither that nor a final answer within this
  // fails the request with connect_failed: the body never left, so it is safe to send elsewhere.
  // For servers known to answer 100 (a server that does not would fail every such request).
  milliseconds continue_wait{0};
};

struct ClientConfig {
  ClientTimeouts timeouts;
  size_t max_header_bytes = size_t{64} * 1024;
  size_t max_body_bytes = size_t{64} * 1024 * 1024;  // buffered responses only; streams are unbounded
  size_t max_idle_per_upstream = 64;
  milliseconds pool_idle{30'000};  // pooled connections older than this are dropped
  // A request that fails on a reused connection before any response byte
  // arrives (the server closed it while idle) is retried once on a fresh one.
  bool retry_stale = true;
  bool tls_verify = true;   // verify the upstream certificate and host name
  std::string tls_ca_file;  // empty: system default CAs
  // A client certificate and key (PEM) presented to upstreams that ask (mutual TLS); both or none.
  std::string tls_cert_file;
  std::string tls_key_file;
  milliseconds timer_resolution{50};
};

class HttpClient;
struct ClientConn;

// A response whose body is read incrementally. Move-only. When the body has
// been read to the end and the upstream allows keep-alive, the connection goes
// back to the pool; a stream destroyed earlier closes its connection.
class ClientStream {
 public:
  ClientStream(ClientStream&&) noexcept;
  ClientStream& operator=(ClientStream&&) noexcept;
  ~ClientStream();

  unsigned status() const;
  const Fields& headers() const;
  bool done() const { return done_; }

  // The next piece of body bytes, as soon as any arrive (chunked framing removed).
  // Empty means the body is complete. The view is valid until the next call.
  asio::awaitable<HttpResult<std::string_view>> read_some();
  // The next SSE event (comments skipped); nullopt at the end of the body.
  asio::awaitable<HttpResult<std::optional<SseEvent>>> next_event();
  // Reads the rest of the body into a string (bounded by max_body_bytes).
  asio::awaitable<HttpResult<std::string>> read_all();

  struct State;

 private:
  friend class HttpClient;
  explicit ClientStream(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
  bool done_ = false;
};

class HttpClient {
 public:
  explicit HttpClient(asio::io_context& ctx, ClientConfig config = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends a request and reads the whole response. Host, Content-Length and
  // keep-alive are filled in when absent.
  asio::awaitable<HttpResult<Response>> send(const Upstream& up, Request req);
  asio::awaitable<HttpResult<Response>> send(const Upstream& up, Request req, ClientTimeouts t);
  // Sends a request and returns once the response headers are in.
  asio::awaitable<HttpResult<ClientStream>> stream(const Upstream& up, Request req);
  asio::awaitable<HttpResult<ClientStream>> stream(const Upstream& up, Request req, ClientTimeouts t);

  // Observability (and tests): connections opened so far, idle pooled ones now.
  uint64_t connections_opened() const { return opened_; }
  size_t idle_connections(const Upstream& up) const;
  void close_idle();

  const ClientConfig& config() const { return cfg_; }

 private:
  friend class ClientStream;
  struct Impl;

  asio::awaitable<HttpResult<ClientStream>> start(const Upstream& up, Request& req, const ClientTimeouts& t);
  asio::awaitable<HttpResult<std::unique_ptr<ClientConn>>> connect(const Upstream& up,
                                                                   const ClientTimeouts& t);
  std::unique_ptr<ClientConn> checkout(const std::string& key);
  void checkin(std::unique_ptr<ClientConn> c);

  asio::io_context& ctx_;
  ClientConfig cfg_;
  std::unique_ptr<Impl> impl_;
  std::unordered_map<std::string, std::vector<std::unique_ptr<ClientConn>>> idle_;
  uint64_t opened_ = 0;
};

}  // namespace cgn::http
