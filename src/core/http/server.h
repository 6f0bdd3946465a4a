// The HTTP/1.1 server: Asio + Beast with C++20 coroutines, keep-alive,
// bounded parsing, timeouts, streaming responses (SSE) flushed per write,
// client-disconnect detection, optional TLS, graceful shutdown.
//
// Threading (see README.md): the Server owns N worker threads, each running
// its own io_context. Worker 0 also runs the acceptor and hands every accepted
// socket to the next worker round-robin. A connection, its handler coroutine
// and everything the handler awaits run on that one worker thread, so a
// handler can use per-worker state (worker_index(), e.g. one HttpClient pool
// per worker) without locks. RouteTable is immutable once start() is called.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/http/sse.h"
#include "core/http/types.h"

namespace cgn::http {

namespace asio = boost::asio;
using std::chrono::milliseconds;

struct ServerLimits {
  size_t max_header_bytes = size_t{16} * 1024;       // request line + headers -> 431 beyond
  size_t max_body_bytes = size_t{16} * 1024 * 1024;  // Content-Length checked before reading -> 413
  // Open connections; one more is answered 503 and closed at once. 0: unlimited.
  size_t max_connections = 0;
  // Request bodies held in memory across all connections (reserved at Content-Length when the
  // headers are in, counted as they arrive when chunked); a request that would go over is
  // answered 503 before its body is read. 0: unlimited.
  size_t max_buffered_bytes = 0;
};

struct ServerTimeouts {
  milliseconds idle{75'000};    // keep-alive: wait for the first byte of the next request
  milliseconds header{10'000};  // first byte of a request until its headers are complete
  milliseconds body{60'000};    // headers complete until the body is complete
  milliseconds write{60'000};   // one response write (a client that stops reading)
  milliseconds tls_handshake{10'000};
  milliseconds linger{1'000};  // after an error response: drain unread input before closing
};

// Runs once per request when its headers are complete: before any body byte is read on purpose
// and before "100 Continue" is sent. A response returned goes out at once and the connection
// closes (its unread body is never buffered); nullopt lets the request proceed. `head` holds the
// request line and headers (its body is not complete). Called on the connection's worker thread.
using HeaderCheck =
    std::function<std::optional<Response>(const Request& head, std::string_view remote_address)>;

// Told when a server cap refuses a connection or a request: `reason` is "connections" or
// "buffered_bytes". Called on a worker thread (any of them): must be thread-safe.
using RejectObserver = std::function<void(std::string_view reason, std::string_view remote_address)>;

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the kernel picks; start() returns the bound port
  size_t threads = 1;
  ServerLimits limits;
  ServerTimeouts timeouts;
  // TLS on the listener when both are set (PEM files).
  std::string tls_cert_file;
  std::string tls_key_file;
  // With TLS: when set, every client must present a certificate this CA (PEM) verifies; the
  // handshake fails otherwise (mutual TLS).
  std::string tls_client_ca_file;
  // Precision of all timeouts (the per-thread deadline sweep interval).
  milliseconds timer_resolution{50};
  int listen_backlog = 1024;
  HeaderCheck header_check;        // optional
  RejectObserver on_cap_rejected;  // optional
};

// One request/response exchange, handed to a route handler. Owned by the
// server's connection; valid until the handler's coroutine completes. Use only
// from the handler (the connection's worker thread).
//
// A handler either calls respond() once, or streams: begin_stream() (status and
// headers go out only now, so a proxy can wait for its upstream's answer), then
// write()/write_event() any number of times (each is sent as one chunk and
// flushed before the call returns), then end_stream(). If the handler returns
// without responding the server sends 500; an unfinished stream is ended.
//
// Client disconnect: while a handler runs, the server keeps a read pending on
// the socket. When the client goes away (or the server aborts the connection
// at the end of a shutdown grace period), client_open() turns false and
// whatever the handler is awaiting at that moment (an upstream read, a timer)
// is cancelled through the coroutine's cancellation slot and completes with
// operation_aborted. Later writes return HttpError::closed.
class Exchange {
 public:
  virtual ~Exchange() = default;

  virtual Request& request() = 0;
  virtual size_t worker_index() const = 0;
  virtual std::string remote_address() const = 0;

  virtual bool client_open() const = 0;
  // The server is shutting down: finish promptly; the connection closes afterwards.
  virtual bool draining() const = 0;
  virtual bool response_started() const = 0;

  virtual asio::awaitable<HttpStatus> respond(Response res) = 0;
  // Sends status and headers; the body follows as chunks (HTTP/1.1) or until
  // close (HTTP/1.0). Content-Length/Transfer-Encoding in headers are replaced.
  virtual asio::awaitable<HttpStatus> begin_stream(unsigned status, Fields headers) = 0;
  // Like begin_stream(), but nothing is written yet: status and headers go out in the same
  // gather write as the first body bytes (write() or end_stream()), which saves a proxy that
  // already holds body bytes one segment and one wake-up of its client. write({}) sends the
  // held-back headers alone; abort() before any write sends nothing.
  virtual HttpStatus begin_stream_deferred(unsigned status, Fields headers) = 0;
  virtual asio::awaitable<HttpStatus> write(std::string_view bytes) = 0;
  virtual asio::awaitable<HttpStatus> end_stream() = 0;
  // write(last_bytes) and end_stream() in one write.
  virtual asio::awaitable<HttpStatus> end_stream(std::string_view last_bytes) = 0;
  // Closes the connection now; a stream ends without its terminating chunk so
  // the client can tell it was truncated.
  virtual void abort() = 0;

  // Convenience: an SSE stream (text/event-stream, no-cache) and one event per call.
  asio::awaitable<HttpStatus> begin_sse(Fields headers = {});
  asio::awaitable<HttpStatus> write_event(const SseEvent& e);
  asio::awaitable<HttpStatus> respond_error(const ApiError& e);
};

using Handler = std::function<asio::awaitable<void>(Exchange&)>;

// Method + exact path routing. Unknown path -> 404, known path with another
// method -> 405 (with Allow), both as OpenAI JSON errors. HEAD runs the GET
// handler and the server sends only the headers. Not thread-safe to
// modify; immutable once given to a started Server.
class RouteTable {
 public:
  // "/metrics" has CORS enabled from the start: every daemon's metrics
  // endpoint answers the dashboard's preflight without opting in.
  RouteTable();
  void add(Verb method, std::string path, Handler handler);
  void get(std::string path, Handler handler) { add(Verb::get, std::move(path), std::move(handler)); }
  void post(std::string path, Handler handler) { add(Verb::post, std::move(path), std::move(handler)); }
  // Every response on this path gets `Access-Control-Allow-Origin: *`, and an
  // OPTIONS preflight is answered 204 with Allow-Methods/Allow-Headers without
  // reaching a handler. Used for /metrics (the browser dashboard scrapes it).
  void enable_cors(std::string path);
  // Handles every path with no exact route (instead of 404), e.g. prefix routes.
  void set_fallback(Handler handler) { fallback_ = std::move(handler); }

  struct Match {
    const Handler* handler = nullptr;  // null: see path_known
    bool path_known = false;           // path exists with other methods -> 405
    bool cors = false;
    std::string allow;  // "GET, POST" for 405 and preflight
  };
  Match find(Verb method, std::string_view path) const;

 private:
  struct Entry {
    std::map<Verb, Handler> by_method;
    bool cors = false;
  };
  std::unordered_map<std::string, Entry> routes_;
  Handler fallback_;
};

// A handler serving a text exposition (Prometheus) from render(), called on the
// worker thread for each scrape; pair with RouteTable::enable_cors("/metrics").
Handler metrics_handler(std::function<std::string()> render);

class Server {
 public:
  Server(ServerConfig config, RouteTable routes);
  ~Server();  // stop(0) if still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads TLS material, binds and listens, starts the workers. Returns the bound port.
  HttpResult<uint16_t> start();
  // Stops accepting, closes idle keep-alive connections, lets in-flight
  // requests and streams finish for up to `grace`, then aborts the rest
  // (cancelling their handlers) and joins the workers. Blocking; call from a
  // thread that is not a worker. Idempotent.
  void stop(milliseconds grace);

  uint16_t port() const { return port_; }
  size_t worker_count() const;
  // A worker's io_context, e.g. to build one HttpClient per worker before start().
  asio::io_context& worker_context(size_t i);

  // Counters, readable from any thread.
  uint64_t connections_accepted() const;
  uint64_t open_connections() const;
  uint64_t requests_served() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

}  // namespace cgn::http
