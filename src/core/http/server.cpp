#include "core/http/server.h"

#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/http/deadline.h"
#include "core/http/request_reader.h"
#include "core/http/transport.h"
#include "core/log.h"

namespace cgn::http {

namespace {

using boost::system::error_code;
using detail::Transport;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr size_t kReadChunk = 8192;
constexpr size_t kMaxLingerBytes = 1 << 20;

class ServerConnection;

// A parked coroutine waiting for the connection's pending read. (Asio's
// any_completion_handler in Boost 1.81 recurses without end when it wraps an
// awaitable handler, so this is a minimal type-erased holder of our own.)
class ReadWaiter {
 public:
  template <class H>
  void set(H&& h) {
    impl_ = std::make_unique<Impl<std::decay_t<H>>>(std::forward<H>(h));
  }
  explicit operator bool() const { return impl_ != nullptr; }
  // Resumes the waiter inline; the holder is released first so the resumed
  // coroutine may park a new waiter.
  void complete(boost::system::error_code ec) {
    std::unique_ptr<Base> p = std::move(impl_);
    p->call(ec);
  }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual void call(boost::system::error_code ec) = 0;
  };
  template <class H>
  struct Impl final : Base {
    explicit Impl(H&& x) : h(std::move(x)) {}
    void call(boost::system::error_code ec) override { std::move(h)(ec); }
    H h;
  };
  std::unique_ptr<Base> impl_;
};

// One worker thread and its io_context. `conns` is touched only on the worker
// thread. Declared before ctx so that frames destroyed with the context can
// still unregister themselves.
struct Worker {
  size_t index = 0;
  std::unordered_set<ServerConnection*> conns;
  asio::io_context ctx{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
};

}  // namespace

struct Server::Impl {
  ServerConfig cfg;
  RouteTable routes;
  std::optional<asio::ssl::context> tls;
  std::vector<std::unique_ptr<Worker>> workers;
  std::optional<tcp::acceptor> acceptor;  // bound to workers[0]
  std::atomic<size_t> next_worker{0};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> open{0};
  std::atomic<uint64_t> served{0};
  std::atomic<size_t> buffered{0};  // request body bytes held (ServerLimits::max_buffered_bytes)
  std::atomic<size_t> refusing{0};  // connections over max_connections being answered 503
  std::atomic<bool> stopping{false};
  bool started = false;
  bool stopped = false;
  std::mutex mu;
  std::condition_variable cv;  // signalled when `open` drops
  log::Logger log = log::get("http");

  void connection_closed() {
    std::lock_guard lock(mu);
    open.fetch_sub(1);
    cv.notify_all();
  }
};

namespace {

// A server-side connection: parses requests, runs handlers, writes responses.
// Owned by its coroutine (run() holds a shared_ptr) and by a pending read, on
// one worker thread; drain()/hard_abort() are posted to that thread.
class ServerConnection final : public Exchange,
                               public detail::DeadlineEntry,
                               public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(Server::Impl& srv, Worker& worker, Transport transport,
                   std::shared_ptr<asio::cancellation_signal> cancel)
      : srv_(srv),
        worker_(worker),
        transport_(std::move(transport)),
        cancel_(std::move(cancel)),
        limits_(srv.cfg.limits),
        timeouts_(srv.cfg.timeouts),
        reader_(RequestLimits{limits_.max_header_bytes, limits_.max_body_bytes}) {}

  ~ServerConnection() override {
    release_body();
    worker_.conns.erase(this);
    if (registered_) {
      detail::DeadlineSweeper::of(worker_.ctx).remove(this);
    }
    srv_.connection_closed();
  }

  static asio::awaitable<void> run(std::shared_ptr<ServerConnection> self) { co_await self->run_impl(); }

  // Shutdown step 1: idle keep-alive connections close now, busy ones after their response.
  void drain() {
    draining_ = true;
    if ((phase_ == Phase::idle && buf_.size() == 0) || phase_ == Phase::handshake) {
      close_now();
    }
  }

  // Shutdown step 2 (grace period over): cancel the handler and close.
  void hard_abort() {
    client_open_ = false;
    if (in_handler_) {
      // Only while the handler runs: then the coroutine is alive and awaiting.
      cancel_->emit(asio::cancellation_type::terminal);
    }
    close_now();
  }

  // Exchange
  Request& request() override { return req_; }
  size_t worker_index() const override { return worker_.index; }
  std::string remote_address() const override {
    if (remote_.empty()) {  // once per connection: the header check asks on every request
      error_code ec;
      auto ep = const_cast<Transport&>(transport_).socket().remote_endpoint(ec);
      if (!ec) {
        remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
      }
    }
    return remote_;
  }
  bool client_open() const override { return client_open_ && !closed_; }
  bool draining() const override { return draining_; }
  bool response_started() const override { return response_started_; }

  asio::awaitable<HttpStatus> respond(Response res) override {
    if (response_started_) {
      co_return http_error(HttpError::invalid_state, "response already started");
    }
    if (!client_open()) {
      co_return http_error(HttpError::closed, "client connection closed");
    }
    response_started_ = true;
    res.version(req_version_);
    if (cors_) {
      res.set(Field::access_control_allow_origin, "*");
    }
    res.keep_alive(keep_alive_);
    res.prepare_payload();
    set_deadline_after(timeouts_.write);
    error_code ec;
    if (head_) {
      // HEAD: the GET response's headers (Content-Length included), no body.
      beast_http::response_serializer<beast_http::string_body> sr{res};
      auto [e, n] = co_await beast_http::async_write_header(transport_, sr, use_tuple);
      ec = e;
    } else {
      // One gather write (header bytes in a reused buffer, then the body): Beast's generic
      // serializer costs more per response than the rest of this function.
      detail::serialize_header(res.base(), whdr_);
      const std::array<asio::const_buffer, 2> bufs{asio::buffer(whdr_), asio::buffer(res.body())};
      auto [e, n] = co_await asio::async_write(transport_, bufs, use_tuple);
      ec = e;
    }
    clear_deadline();
    co_return write_result(ec);
  }

  asio::awaitable<HttpStatus> begin_stream(unsigned status, Fields headers) override {
    if (auto st = open_stream(status, std::move(headers)); !st) {
      co_return st;
    }
    beast_http::response_serializer<beast_http::empty_body> sr{stream_header_};
    set_deadline_after(timeouts_.write);
    auto [ec, n] = co_await beast_http::async_write_header(transport_, sr, use_tuple);
    clear_deadline();
    co_return write_result(ec);
  }

  HttpStatus begin_stream_deferred(unsigned status, Fields headers) override {
    if (auto st = open_stream(status, std::move(headers)); !st) {
      return st;
    }
    detail::serialize_header(stream_header_, whdr_);
    header_pending_ = true;
    return Ok{};
  }

  asio::awaitable<HttpStatus> write(std::string_view bytes) override {
    if (!stream_open_) {
      co_return http_error(HttpError::invalid_state, "write() before begin_stream() or after end_stream()");
    }
    if (!client_open()) {
      co_return http_error(HttpError::closed, "client connection closed");
    }
    co_return co_await send_stream(bytes, /*last=*/false);
  }

  asio::awaitable<HttpStatus> end_stream() override {
    if (!stream_open_) {
      co_return http_error(HttpError::invalid_state, "no stream open");
    }
    stream_open_ = false;
    if (!client_open()) {
      co_return http_error(HttpError::closed, "client connection closed");
    }
    co_return co_await send_stream({}, /*last=*/true);
  }

  asio::awaitable<HttpStatus> end_stream(std::string_view last_bytes) override {
    if (!stream_open_) {
      co_return http_error(HttpError::invalid_state, "no stream open");
    }
    stream_open_ = false;
    if (!client_open()) {
      co_return http_error(HttpError::closed, "client connection closed");
    }
    co_return co_await send_stream(last_bytes, /*last=*/true);
  }

  void abort() override {
    stream_open_ = false;
    close_now();
  }

 private:
  enum class Phase { handshake, idle, headers, body, handling, closing };

  // begin_stream*(): the checks and the header (kept in stream_header_), nothing written.
  HttpStatus open_stream(unsigned status, Fields headers) {
    if (response_started_) {
      return http_error(HttpError::invalid_state, "response already started");
    }
    if (!client_open()) {
      return http_error(HttpError::closed, "client connection closed");
    }
    response_started_ = true;
    stream_open_ = true;
    header_pending_ = false;
    auto& res = stream_header_;
    static_cast<Fields&>(res) = std::move(headers);
    res.result(static_cast<beast_http::status>(status));
    res.version(req_version_);
    res.erase(Field::content_length);
    res.erase(Field::transfer_encoding);
    chunked_ = req_version_ >= 11;
    if (chunked_) {
      res.chunked(true);
    } else {
      keep_alive_ = false;  // HTTP/1.0: the body ends at close
    }
    if (cors_) {
      res.set(Field::access_control_allow_origin, "*");
    }
    res.keep_alive(keep_alive_);
    return Ok{};
  }

  // One gather write: the held-back header (begin_stream_deferred), `bytes` as one chunk (as
  // they are for HTTP/1.0), and with `last` the terminating chunk. Nothing to send: no syscall.
  asio::awaitable<HttpStatus> send_stream(std::string_view bytes, bool last) {
    if (head_) {
      bytes = {};  // HEAD: the headers only
    }
    std::array<asio::const_buffer, 5> bufs;
    size_t n = 0;
    if (header_pending_) {
      bufs[n++] = asio::buffer(whdr_);
    }
    char size_line[24];
    if (!bytes.empty()) {
      if (chunked_) {
        const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", bytes.size());
        bufs[n++] = asio::buffer(size_line, static_cast<size_t>(len));
        bufs[n++] = asio::buffer(bytes.data(), bytes.size());
        bufs[n++] = asio::buffer("\r\n", 2);
      } else {
        bufs[n++] = asio::buffer(bytes.data(), bytes.size());
      }
    }
    if (last && chunked_ && !head_) {
      bufs[n++] = asio::buffer("0\r\n\r\n", 5);
    }
    if (n == 0) {
      co_return Ok{};  // an empty chunk would end the body
    }
    header_pending_ = false;
    set_deadline_after(timeouts_.write);
    auto [ec, written] = co_await asio::async_write(
        transport_, std::span<const asio::const_buffer>(bufs.data(), n), use_tuple);
    clear_deadline();
    co_return write_result(ec);
  }

  void on_deadline() override {
    timed_out_ = true;
    close_now();
  }

  void close_now() {
    client_open_ = false;
    if (!closed_) {
      closed_ = true;
      transport_.close();
    }
  }

  HttpStatus write_result(error_code ec) {
    if (!ec) {
      return Ok{};
    }
    close_now();
    if (timed_out_) {
      return http_error(HttpError::timeout, "write timed out");
    }
    if (ec == asio::error::operation_aborted) {
      return http_error(HttpError::cancelled, "write cancelled");
    }
    return http_error(HttpError::closed, "write failed: " + ec.message());
  }

  // Reads are callback-driven so that one can stay pending while a handler
  // runs (client-disconnect detection); the coroutine waits for its result
  // through waiter_. Bytes land in rbuf_ and are appended to buf_, so buf_
  // can be parsed and consumed while a read is in flight.
  void start_read() {
    read_pending_ = true;
    transport_.async_read_some(
        asio::buffer(rbuf_), [self = shared_from_this()](error_code ec, size_t n) { self->on_read(ec, n); });
  }

  void on_read(error_code ec, size_t n) {
    read_pending_ = false;
    if (!ec) {
      auto dst = buf_.prepare(n);
      std::memcpy(dst.data(), rbuf_.data(), n);
      buf_.commit(n);
    } else {
      peer_closed_ = true;
      if (in_handler_ && client_open_) {
        client_open_ = false;
        cancel_->emit(asio::cancellation_type::terminal);
      }
    }
    if (waiter_) {
      waiter_.complete(ec);
      return;
    }
    read_done_ = true;
    read_ec_ = ec;
    // Still inside a handler and the bytes were a pipelined request: keep watching, bounded.
    if (!ec && in_handler_ && buf_.size() < limits_.max_header_bytes && !closed_) {
      start_read();
    }
  }

  asio::awaitable<error_code> read_more() {
    if (read_done_) {
      read_done_ = false;
      co_return read_ec_;
    }
    if (closed_) {
      co_return asio::error::operation_aborted;
    }
    if (!read_pending_) {
      start_read();
    }
    auto [ec] = co_await asio::async_initiate<decltype(use_tuple), void(error_code)>(
        [this](auto handler) { waiter_.set(std::move(handler)); }, use_tuple);
    co_return ec;
  }

  asio::awaitable<void> run_impl() {
    co_await asio::this_coro::throw_if_cancelled(false);
    worker_.conns.insert(this);
    detail::DeadlineSweeper::of(worker_.ctx).add(this);
    registered_ = true;
    draining_ = srv_.stopping.load();
    if (auto* tls = transport_.tls()) {
      phase_ = Phase::handshake;
      set_deadline_after(timeouts_.tls_handshake);
      auto [ec] = co_await tls->async_handshake(asio::ssl::stream_base::server, use_tuple);
      clear_deadline();
      if (ec || closed_) {
        close_now();
        co_return;
      }
    }
    while (!closed_) {
      if (!co_await read_request()) {
        break;
      }
      co_await handle();
      req_ = Request{};  // the body's memory goes back with its share of max_buffered_bytes
      release_body();
      srv_.served.fetch_add(1, std::memory_order_relaxed);
      if (!keep_alive_ || !client_open() || draining_) {
        break;
      }
    }
    co_await close_gracefully();
  }

  asio::awaitable<bool> read_request() {
    phase_ = buf_.size() > 0 ? Phase::headers : Phase::idle;
    set_deadline_after(phase_ == Phase::idle ? timeouts_.idle : timeouts_.header);
    bool continue_sent = false;
    bool head_checked = false;
    for (;;) {
      if (buf_.size() > 0 && phase_ == Phase::idle) {
        phase_ = Phase::headers;
        set_deadline_after(timeouts_.header);
      }
      const RequestReader::State st = reader_.parse(buf_);
      if (st == RequestReader::State::error) {
        co_await reject(reader_.error());
        co_return false;
      }
      if (reader_.header_done() && !head_checked) {
        // The headers alone decide whether the body is worth reading (no 100 Continue before).
        head_checked = true;
        if (srv_.cfg.header_check) {
          if (std::optional<Response> refusal = srv_.cfg.header_check(reader_.head(), remote_address())) {
            co_await refuse(std::move(*refusal));
            co_return false;
          }
        }
      }
      if (!hold_body()) {
        if (srv_.cfg.on_cap_rejected) {
          srv_.cfg.on_cap_rejected("buffered_bytes", remote_address());
        }
        Response busy = make_error_response(service_unavailable(
            "The server holds too many request bodies in memory; retry later.", "server_busy"));
        busy.set(Field::retry_after, "1");
        co_await refuse(std::move(busy));
        co_return false;
      }
      if (st == RequestReader::State::done) {
        break;
      }
      if (reader_.header_done() && phase_ != Phase::body) {
        phase_ = Phase::body;
        set_deadline_after(timeouts_.body);
      }
      if (!continue_sent && reader_.wants_continue()) {
        continue_sent = true;
        auto [wec, wn] = co_await asio::async_write(
            transport_, asio::buffer("HTTP/1.1 100 Continue\r\n\r\n", 25), use_tuple);
        if (wec) {
          close_now();
          co_return false;
        }
      }
      if (draining_ && phase_ == Phase::idle) {
        co_return false;
      }
      const error_code ec = co_await read_more();
      if (ec) {
        co_return false;  // peer gone, timeout or shutdown: nothing useful to answer
      }
    }
    clear_deadline();
    keep_alive_ = reader_.keep_alive();
    req_ = reader_.take();
    req_version_ = req_.version() == 10 ? 10 : 11;
    head_ = req_.method() == Verb::head;
    co_return true;
  }

  asio::awaitable<void> reject(const ApiError& e) { co_await refuse(make_error_response(e)); }

  // Answers `res` without reading the rest of the request, then closes (after a short linger).
  asio::awaitable<void> refuse(Response res) {
    keep_alive_ = false;
    linger_ = true;
    req_version_ = 11;
    head_ = false;
    cors_ = false;
    response_started_ = false;
    client_open_ = !peer_closed_;
    (void)co_await respond(std::move(res));
  }

  // Holds the current request's body bytes against max_buffered_bytes: all of Content-Length
  // once the headers are in, or what a chunked body has grown to. False: over the cap.
  bool hold_body() {
    const size_t cap = limits_.max_buffered_bytes;
    if (cap == 0 || !reader_.header_done()) {
      return true;
    }
    const std::optional<uint64_t> announced = reader_.content_length();
    const size_t want = announced ? static_cast<size_t>(*announced) : reader_.body_bytes();
    if (want <= held_) {
      return true;
    }
    const size_t more = want - held_;
    size_t cur = srv_.buffered.load(std::memory_order_relaxed);
    do {
      if (more > cap || cur > cap - more) {
        return false;
      }
    } while (!srv_.buffered.compare_exchange_weak(cur, cur + more, std::memory_order_relaxed));
    held_ = want;
    return true;
  }

  void release_body() {
    if (held_ > 0) {
      srv_.buffered.fetch_sub(held_, std::memory_order_relaxed);
      held_ = 0;
    }
  }

  asio::awaitable<void> handle() {
    phase_ = Phase::handling;
    response_started_ = false;
    stream_open_ = false;
    header_pending_ = false;
    chunked_ = false;
    client_open_ = !peer_closed_ && !closed_;
    if (draining_) {
      keep_alive_ = false;
    }
    const std::string_view path = path_of(req_.target());
    const RouteTable::Match match = srv_.routes.find(req_.method(), path);
    cors_ = match.cors;
    if (!match.handler) {
      Response res;
      if (cors_ && req_.method() == Verb::options) {
        res = Response{beast_http::status::no_content, 11};
        res.set("Access-Control-Allow-Methods", match.allow.empty() ? "OPTIONS" : match.allow + ", OPTIONS");
        const auto requested = req_[Field::access_control_request_headers];
        res.set("Access-Control-Allow-Headers",
                requested.empty() ? std::string("*") : std::string(requested));
        res.set("Access-Control-Max-Age", "86400");
      } else if (match.path_known) {
        res = make_error_response(method_not_allowed("method " + std::string(req_.method_string()) +
                                                     " not allowed on " + std::string(path)));
        res.set(Field::allow, match.allow);
      } else {
        res = make_error_response(not_found("no route for " + std::string(path), "", "not_found"));
      }
      (void)co_await respond(std::move(res));
      co_return;
    }
    in_handler_ = true;
    if (!read_pending_ && !read_done_ && !peer_closed_ && !closed_ &&
        buf_.size() < limits_.max_header_bytes) {
      start_read();  // watch for disconnect while the handler runs
    }
    try {
      co_await (*match.handler)(*this);
    } catch (const std::exception& ex) {
      srv_.log->error("handler threw: {} path={}", ex.what(), path);
    } catch (...) {
      srv_.log->error("handler threw a non-exception path={}", path);
    }
    in_handler_ = false;
    if (!response_started_) {
      if (client_open()) {
        (void)co_await respond(make_error_response(internal_error("handler produced no response")));
      }
    } else if (stream_open_ && client_open()) {
      (void)co_await end_stream();
    }
    stream_open_ = false;
  }

  asio::awaitable<void> close_gracefully() {
    phase_ = Phase::closing;
    if (closed_) {
      co_return;
    }
    if (linger_ && !peer_closed_ && !transport_.is_tls()) {
      // Half-close, then drain what the client is still sending so the kernel
      // does not answer it with a reset that could destroy our error response.
      error_code ignored;
      transport_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      set_deadline_after(timeouts_.linger);
      size_t drained = 0;
      while (drained < kMaxLingerBytes && !closed_) {
        if (co_await read_more()) {
          break;
        }
        drained += buf_.size();
        buf_.consume(buf_.size());
      }
      clear_deadline();
    }
    close_now();
  }

  Server::Impl& srv_;
  Worker& worker_;
  Transport transport_;
  std::shared_ptr<asio::cancellation_signal> cancel_;
  const ServerLimits limits_;
  const ServerTimeouts timeouts_;

  boost::beast::flat_buffer buf_;
  std::array<char, kReadChunk> rbuf_{};
  std::string whdr_;  // respond(), begin_stream_deferred(): the serialized header, reused
  beast_http::response<beast_http::empty_body> stream_header_;
  RequestReader reader_;
  Request req_;
  size_t held_ = 0;             // bytes of Impl::buffered this connection holds
  mutable std::string remote_;  // remote_address(), cached
  unsigned req_version_ = 11;

  ReadWaiter waiter_;
  error_code read_ec_;
  bool read_pending_ = false;
  bool read_done_ = false;

  Phase phase_ = Phase::idle;
  bool registered_ = false;
  bool keep_alive_ = true;
  bool draining_ = false;
  bool closed_ = false;
  bool peer_closed_ = false;
  bool timed_out_ = false;
  bool linger_ = false;
  bool in_handler_ = false;
  bool client_open_ = true;
  bool response_started_ = false;
  bool stream_open_ = false;
  bool header_pending_ = false;  // begin_stream_deferred(): whdr_ goes out with the first write
  bool chunked_ = false;
  bool cors_ = false;
  bool head_ = false;
};

void log_exception(const log::Logger& log, const char* what, const std::exception_ptr& e) {
  if (!e) {
    return;
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log->error("{} ended with an exception: {}", what, ex.what());
  } catch (...) {
    log->error("{} ended with an unknown exception", what);
  }
}

// A connection over max_connections: answered 503 and closed without a handler. It lingers up to
// `linger` so the client reads the answer rather than a reset; at most kMaxRefusing at once linger,
// the rest are closed at once.
constexpr size_t kMaxRefusing = 256;

asio::awaitable<void> refuse_connection(Server::Impl* s, tcp::socket sock) {
  co_await asio::this_coro::throw_if_cancelled(false);
  static const std::string kBusy = [] {
    Response res = make_error_response(
        service_unavailable("The server has too many open connections; retry later.", "server_busy"));
    res.set(Field::retry_after, "1");
    res.keep_alive(false);
    res.prepare_payload();
    std::string out;
    detail::serialize_header(res.base(), out);
    return out + res.body();
  }();
  asio::steady_timer timer(sock.get_executor());
  timer.expires_after(s->cfg.timeouts.linger);
  timer.async_wait([&sock](error_code ec) {
    if (!ec) {
      error_code ignored;
      sock.close(ignored);
    }
  });
  auto [wec, wn] = co_await asio::async_write(sock, asio::buffer(kBusy), use_tuple);
  if (!wec) {
    error_code ignored;
    sock.shutdown(tcp::socket::shutdown_send, ignored);
    std::array<char, 4096> sink{};
    for (;;) {
      auto [rec, rn] = co_await sock.async_read_some(asio::buffer(sink), use_tuple);
      if (rec) {
        break;
      }
    }
  }
  timer.cancel();
  error_code ignored;
  sock.close(ignored);
  s->refusing.fetch_sub(1);
}

asio::awaitable<void> accept_loop(Server::Impl* s) {
  co_await asio::this_coro::throw_if_cancelled(false);
  asio::steady_timer backoff(s->workers[0]->ctx);
  for (;;) {
    Worker& w = *s->workers[s->next_worker.fetch_add(1, std::memory_order_relaxed) % s->workers.size()];
    auto [ec, sock] = co_await s->acceptor->async_accept(w.ctx, use_tuple);
    if (s->stopping.load() || !s->acceptor->is_open()) {
      break;
    }
    if (ec) {
      if (ec == asio::error::operation_aborted) {
        break;
      }
      // Out of descriptors and the like: back off instead of spinning.
      s->log->warn("accept failed: {}", ec.message());
      backoff.expires_after(std::chrono::milliseconds(50));
      (void)co_await backoff.async_wait(use_tuple);
      continue;
    }
    error_code ignored;
    sock.set_option(tcp::no_delay(true), ignored);
    if (const size_t cap = s->cfg.limits.max_connections; cap > 0 && s->open.load() >= cap) {
      if (s->cfg.on_cap_rejected) {
        const auto ep = sock.remote_endpoint(ignored);
        s->cfg.on_cap_rejected(
            "connections",
            ignored ? std::string() : ep.address().to_string() + ":" + std::to_string(ep.port()));
      }
      if (s->tls || s->refusing.fetch_add(1) >= kMaxRefusing) {
        if (!s->tls) {
          s->refusing.fetch_sub(1);
        }
        sock.close(ignored);  // TLS: a plaintext answer would be noise before a handshake
        continue;
      }
      asio::co_spawn(w.ctx, refuse_connection(s, std::move(sock)), asio::detached);
      continue;
    }
    s->accepted.fetch_add(1, std::memory_order_relaxed);
    s->open.fetch_add(1);
    auto sig = std::make_shared<asio::cancellation_signal>();
    auto conn = s->tls ? std::make_shared<ServerConnection>(*s, w, Transport(std::move(sock), *s->tls), sig)
                       : std::make_shared<ServerConnection>(*s, w, Transport(std::move(sock)), sig);
    asio::co_spawn(w.ctx, ServerConnection::run(std::move(conn)),
                   asio::bind_cancellation_slot(sig->slot(), [sig, s](const std::exception_ptr& e) {
                     log_exception(s->log, "connection", e);
                   }));
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Exchange helpers

asio::awaitable<HttpStatus> Exchange::begin_sse(Fields headers) {
  headers.set(Field::content_type, "text/event-stream");
  headers.set(Field::cache_control, "no-cache");
  headers.set("X-Accel-Buffering", "no");
  auto st = co_await begin_stream(200, std::move(headers));
  co_return st;
}

asio::awaitable<HttpStatus> Exchange::write_event(const SseEvent& e) {
  const std::string wire = format_sse_event(e);
  auto st = co_await write(wire);
  co_return st;
}

asio::awaitable<HttpStatus> Exchange::respond_error(const ApiError& e) {
  auto st = co_await respond(make_error_response(e));
  co_return st;
}

// ---------------------------------------------------------------------------
// RouteTable

void RouteTable::add(Verb method, std::string path, Handler handler) {
  Entry& e = routes_[std::move(path)];
  e.by_method[method] = std::move(handler);
}

RouteTable::RouteTable() {
  enable_cors("/metrics");
}

void RouteTable::enable_cors(std::string path) {
  routes_[std::move(path)].cors = true;
}

RouteTable::Match RouteTable::find(Verb method, std::string_view path) const {
  Match m;
  const auto it = routes_.find(std::string(path));
  if (it == routes_.end() || it->second.by_method.empty()) {
    // No handler of its own (possibly a CORS-only entry such as an unused /metrics).
    if (fallback_) {
      m.handler = &fallback_;
      m.cors = it != routes_.end() && it->second.cors;
    }
    return m;
  }
  m.cors = it->second.cors;
  m.path_known = !it->second.by_method.empty();
  if (const auto h = it->second.by_method.find(method); h != it->second.by_method.end()) {
    m.handler = &h->second;
    return m;
  }
  if (method == Verb::head) {
    if (const auto g = it->second.by_method.find(Verb::get); g != it->second.by_method.end()) {
      m.handler = &g->second;  // HEAD is GET without the body (the connection drops it)
      return m;
    }
  }
  for (const auto& [verb, unused] : it->second.by_method) {
    if (!m.allow.empty()) {
      m.allow += ", ";
    }
    m.allow += std::string(beast_http::to_string(verb));
  }
  return m;
}

namespace {
asio::awaitable<void> serve_metrics(std::shared_ptr<std::function<std::string()>> render, Exchange& ex) {
  (void)co_await ex.respond(make_response(200, (*render)(), "text/plain; version=0.0.4; charset=utf-8"));
}
}  // namespace

Handler metrics_handler(std::function<std::string()> render) {
  auto r = std::make_shared<std::function<std::string()>>(std::move(render));
  return [r](Exchange& ex) { return serve_metrics(r, ex); };
}

// ---------------------------------------------------------------------------
// Server

Server::Server(ServerConfig config, RouteTable routes) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = std::move(config);
  impl_->routes = std::move(routes);
  const size_t n = impl_->cfg.threads == 0 ? 1 : impl_->cfg.threads;
  for (size_t i = 0; i < n; ++i) {
    auto w = std::make_unique<Worker>();
    w->index = i;
    detail::DeadlineSweeper::of(w->ctx).set_interval(impl_->cfg.timer_resolution);
    impl_->workers.push_back(std::move(w));
  }
}

Server::~Server() {
  stop(milliseconds(0));
  // Connections still parked in a context are destroyed with it and report to
  // Impl (mutex, counters): tear the contexts down while Impl is whole.
  impl_->acceptor.reset();
  impl_->workers.clear();
}

size_t Server::worker_count() const {
  return impl_->workers.size();
}
asio::io_context& Server::worker_context(size_t i) {
  return impl_->workers.at(i)->ctx;
}
uint64_t Server::connections_accepted() const {
  return impl_->accepted.load();
}
uint64_t Server::open_connections() const {
  return impl_->open.load();
}
uint64_t Server::requests_served() const {
  return impl_->served.load();
}

HttpResult<uint16_t> Server::start() {
  Impl& s = *impl_;
  if (s.started) {
    return port_;
  }
  if (!s.cfg.tls_cert_file.empty() || !s.cfg.tls_key_file.empty()) {
    if (s.cfg.tls_cert_file.empty() || s.cfg.tls_key_file.empty()) {
      return http_error(HttpError::tls, "TLS needs both tls_cert_file and tls_key_file");
    }
    s.tls.emplace(asio::ssl::context::tls_server);
    error_code ec;
    s.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1,
                       ec);
    if (!ec) {
      s.tls->use_certificate_chain_file(s.cfg.tls_cert_file, ec);
    }
    if (ec) {
      return http_error(HttpError::tls,
                        "cannot load TLS certificate " + s.cfg.tls_cert_file + ": " + ec.message());
    }
    s.tls->use_private_key_file(s.cfg.tls_key_file, asio::ssl::context::pem, ec);
    if (ec) {
      return http_error(HttpError::tls, "cannot load TLS key " + s.cfg.tls_key_file + ": " + ec.message());
    }
    if (!s.cfg.tls_client_ca_file.empty()) {
      s.tls->load_verify_file(s.cfg.tls_client_ca_file, ec);
      if (ec) {
        return http_error(HttpError::tls,
                          "cannot load client CA " + s.cfg.tls_client_ca_file + ": " + ec.message());
      }
      s.tls->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    }
  }
  error_code ec;
  const auto addr = asio::ip::make_address(s.cfg.host, ec);
  if (ec) {
    return http_error(HttpError::bind_failed, "bad listen address '" + s.cfg.host + "': " + ec.message());
  }
  const tcp::endpoint ep(addr, s.cfg.port);
  s.acceptor.emplace(s.workers[0]->ctx);
  if (s.acceptor->open(ep.protocol(), ec); !ec) {
    s.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    s.acceptor->bind(ep, ec);
  }
  if (!ec) {
    s.acceptor->listen(s.cfg.listen_backlog, ec);
  }
  if (ec) {
    s.acceptor.reset();
    return http_error(HttpError::bind_failed, "cannot listen on " + s.cfg.host + ":" +
                                                  std::to_string(s.cfg.port) + ": " + ec.message());
  }
  port_ = s.acceptor->local_endpoint(ec).port();
  s.started = true;
  Impl* sp = &s;
  asio::co_spawn(s.workers[0]->ctx, accept_loop(sp),
                 [sp](const std::exception_ptr& e) { log_exception(sp->log, "accept loop", e); });
  for (auto& w : s.workers) {
    w->guard.emplace(w->ctx.get_executor());
    Worker* wp = w.get();
    w->thread = std::thread([wp, sp] {
      for (;;) {
        try {
          wp->ctx.run();
          return;
        } catch (const std::exception& ex) {
          sp->log->error("worker {} handler threw: {}", wp->index, ex.what());
        }
      }
    });
  }
  return port_;
}

void Server::stop(milliseconds grace) {
  Impl& s = *impl_;
  if (!s.started || s.stopped) {
    return;
  }
  s.stopped = true;
  s.stopping.store(true);
  Impl* sp = &s;
  asio::post(s.workers[0]->ctx, [sp] {
    error_code ignored;
    sp->acceptor->close(ignored);
  });
  for (auto& w : s.workers) {
    Worker* wp = w.get();
    asio::post(wp->ctx, [wp] {
      for (ServerConnection* c : wp->conns) {
        c->drain();
      }
    });
  }
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, grace, [&] { return s.open.load() == 0; });
  }
  if (s.open.load() > 0) {
    for (auto& w : s.workers) {
      Worker* wp = w.get();
      asio::post(wp->ctx, [wp] {
        for (ServerConnection* c : wp->conns) {
          c->hard_abort();
        }
      });
    }
    std::unique_lock lock(s.mu);
    if (!s.cv.wait_for(lock, std::chrono::seconds(5), [&] { return s.open.load() == 0; })) {
      s.log->warn("{} connections still open after abort; stopping workers", s.open.load());
    }
  }
  for (auto& w : s.workers) {
    w->guard.reset();
    w->ctx.stop();
  }
  for (auto& w : s.workers) {
    if (w->thread.joinable()) {
      w->thread.join();
    }
  }
}

}  // namespace cgn::http
