#include "core/http/client.h"

#include <sys/socket.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <utility>

#include "core/http/deadline.h"
#include "core/http/transport.h"

namespace cgn::http {

namespace {
using boost::system::error_code;
using detail::SteadyTime;
using detail::Transport;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr size_t kScratchBytes = size_t{16} * 1024;
// Initial capacity of a connection's read buffer. Beast reads at most the free capacity (at
// least 512 bytes) per syscall, so a default buffer takes a 1.5 KiB answer in three reads.
constexpr size_t kConnReadBytes = size_t{4} * 1024;
}  // namespace

// One upstream connection. Registered with the io_context's deadline sweeper
// only while a request is using it, so an idle pool keeps no timer running.
struct ClientConn final : detail::DeadlineEntry {
  ClientConn(detail::DeadlineSweeper& sw, std::string k, Transport tr)
      : sweeper(sw), key(std::move(k)), t(std::move(tr)) {}
  ~ClientConn() {
    sweeper.remove(this);
    t.close();
  }
  void on_deadline() override {
    timed_out = true;
    if (resolver) {
      resolver->cancel();
    }
    t.close();
  }
  void activate() {
    timed_out = false;
    sweeper.add(this);
  }
  void deactivate() {
    clear_deadline();
    sweeper.remove(this);
  }

  detail::DeadlineSweeper& sweeper;
  std::string key;
  Transport t;
  boost::beast::flat_buffer buf = [] {
    boost::beast::flat_buffer b;
    b.reserve(kConnReadBytes);
    return b;
  }();
  std::string whdr;  // the request header being written, reused across requests
  SteadyTime idle_since{};
  tcp::resolver* resolver = nullptr;
  bool timed_out = false;
};

// Scratch buffers of finished streams, reused by the next ones (one malloc of 16 KiB per
// request otherwise). Bounded; touched only on the client's thread. Shared with the streams, so
// a stream destroyed after its client (a coroutine frame torn down late) still has it.
struct ScratchPool {
  static constexpr size_t kKeep = 64;
  std::vector<std::unique_ptr<char[]>> free;
  std::unique_ptr<char[]> take() {
    if (free.empty()) {
      // Left uninitialised: the kernel only touches (makes resident) what a read fills, so
      // 10,000 open SSE streams of a few hundred bytes per read do not each pay 16 KiB of RSS.
      return std::unique_ptr<char[]>(new char[kScratchBytes]);
    }
    std::unique_ptr<char[]> b = std::move(free.back());
    free.pop_back();
    return b;
  }
  void give(std::unique_ptr<char[]> b) {
    if (b && free.size() < kKeep) {
      free.push_back(std::move(b));
    }
  }
};

struct HttpClient::Impl {
  std::optional<asio::ssl::context> tls;
  std::string tls_error;
  std::shared_ptr<ScratchPool> scratch = std::make_shared<ScratchPool>();
};

using HeadParser = beast_http::response_parser<beast_http::empty_body>;

struct ClientStream::State {
  explicit State(std::shared_ptr<ScratchPool> p) : pool(std::move(p)), scratch(pool->take()) {}
  // A final answer already read into `head` (its header only; no body byte consumed).
  State(std::shared_ptr<ScratchPool> p, HeadParser&& head)
      : pool(std::move(p)), parser(std::move(head)), scratch(pool->take()) {}
  ~State() { pool->give(std::move(scratch)); }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  HttpClient* client = nullptr;
  std::shared_ptr<ScratchPool> pool;  // declared before scratch: taken from it first
  std::unique_ptr<ClientConn> conn;
  beast_http::response_parser<beast_http::buffer_body> parser;
  ClientTimeouts timeouts;
  std::optional<SteadyTime> body_deadline;  // send(): the whole body
  std::unique_ptr<char[]> scratch;          // body bytes land here (kScratchBytes)
  SseParser sse;
  bool reusable = true;  // false: answered before our body went out; never pooled
};

namespace {

Error<HttpError> map_error(error_code ec, bool timed_out, std::string_view what) {
  std::string msg = std::string(what) + ": " + ec.message();
  if (timed_out) {
    return http_error(HttpError::timeout, std::string(what) + " timed out");
  }
  if (ec == asio::error::operation_aborted) {
    return http_error(HttpError::cancelled, std::string(what) + " cancelled");
  }
  if (ec == beast_http::error::header_limit || ec == beast_http::error::body_limit ||
      ec == beast_http::error::buffer_overflow) {
    return http_error(HttpError::too_large, std::move(msg));
  }
  if (ec.category() == beast_http::make_error_code(beast_http::error::bad_version).category() &&
      ec != beast_http::error::end_of_stream && ec != beast_http::error::partial_message) {
    return http_error(HttpError::protocol, std::move(msg));
  }
  return http_error(HttpError::closed, std::move(msg));
}

// The errors a pooled connection shows when the server closed it while idle.
bool is_stale(error_code ec) {
  return ec == beast_http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::ssl::error::stream_truncated;
}

// Non-blocking peek: a pooled connection whose peer has closed (or sent
// anything unsolicited) is not reused.
bool looks_alive(ClientConn& c) {
  if (c.buf.size() != 0 || !c.t.socket().is_open()) {
    return false;
  }
  char byte;
  const ssize_t r = ::recv(c.t.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

std::string Upstream::key() const {
  std::string k = host + ":" + std::to_string(port);
  if (tls) {
    k += ":tls";
  }
  return k;
}

// ---------------------------------------------------------------------------
// ClientStream

ClientStream::ClientStream(std::unique_ptr<State> s) : s_(std::move(s)) {
  done_ = s_->parser.is_done();
  if (done_) {
    // No body (204, 304, Content-Length: 0): the connection is free now.
    if (s_->parser.keep_alive() && s_->reusable) {
      s_->client->checkin(std::move(s_->conn));
    } else {
      s_->conn.reset();
    }
  }
}
ClientStream::ClientStream(ClientStream&&) noexcept = default;
ClientStream& ClientStream::operator=(ClientStream&&) noexcept = default;
ClientStream::~ClientStream() = default;

unsigned ClientStream::status() const {
  return s_->parser.get().result_int();
}
const Fields& ClientStream::headers() const {
  return s_->parser.get();
}

asio::awaitable<HttpResult<std::string_view>> ClientStream::read_some() {
  if (done_) {
    co_return std::string_view{};
  }
  State& st = *s_;
  ClientConn* c = st.conn.get();
  for (;;) {
    auto& body = st.parser.get().body();
    body.data = st.scratch.get();
    body.size = kScratchBytes;
    SteadyTime deadline = std::chrono::steady_clock::now() + st.timeouts.idle;
    if (st.body_deadline && *st.body_deadline < deadline) {
      deadline = *st.body_deadline;
    }
    c->set_deadline_at(deadline);
    auto [ec, n] = co_await beast_http::async_read_some(c->t, c->buf, st.parser, use_tuple);
    c->clear_deadline();
    if (ec == beast_http::error::need_buffer) {
      ec = {};
    }
    if (ec) {
      auto err = map_error(ec, c->timed_out, "reading response body");
      done_ = true;
      st.conn.reset();
      co_return err;
    }
    // Beast hands over one chunk per read; the chunks already received (a burst of SSE events,
    // the end of the body) are parsed now, so the caller gets them in one piece, no syscall.
    while (!st.parser.is_done() && c->buf.size() != 0 && st.parser.get().body().size != 0) {
      error_code pec;
      const size_t used = st.parser.put(c->buf.data(), pec);
      c->buf.consume(used);
      if (pec == beast_http::error::need_buffer) {
        break;  // the scratch buffer is full
      }
      if (pec == beast_http::error::need_more || (!pec && used == 0)) {
        break;  // a partial chunk header: the next read brings the rest
      }
      if (pec) {
        auto err = map_error(pec, false, "reading response body");
        done_ = true;
        st.conn.reset();
        co_return err;
      }
    }
    const size_t got = kScratchBytes - st.parser.get().body().size;
    if (st.parser.is_done()) {
      done_ = true;
      if (st.parser.keep_alive() && st.reusable && c->buf.size() == 0) {
        st.client->checkin(std::move(st.conn));
      } else {
        st.conn.reset();
      }
    }
    if (got > 0 || done_) {
      co_return std::string_view(st.scratch.get(), got);
    }
  }
}

asio::awaitable<HttpResult<std::optional<SseEvent>>> ClientStream::next_event() {
  State& st = *s_;
  for (;;) {
    SseEvent ev;
    if (st.sse.pop(ev)) {
      co_return std::optional<SseEvent>(std::move(ev));
    }
    if (done_) {
      st.sse.finish();
      co_return std::optional<SseEvent>();
    }
    auto piece = co_await read_some();
    if (!piece) {
      co_return piece.error();
    }
    if (auto fed = st.sse.feed(*piece); !fed) {
      st.conn.reset();
      done_ = true;
      co_return http_error(HttpError::protocol, "bad SSE stream: " + fed.error().message);
    }
  }
}

asio::awaitable<HttpResult<std::string>> ClientStream::read_all() {
  std::string out;
  const size_t limit = s_->client->config().max_body_bytes;
  if (auto len = s_->parser.content_length(); len && *len <= limit) {
    out.reserve(static_cast<size_t>(*len));
  }
  while (!done_) {
    auto piece = co_await read_some();
    if (!piece) {
      co_return piece.error();
    }
    if (out.size() + piece->size() > limit) {
      s_->conn.reset();
      done_ = true;
      co_return http_error(HttpError::too_large, "response body exceeds " + std::to_string(limit) + " bytes");
    }
    out.append(*piece);
  }
  co_return out;
}

// ---------------------------------------------------------------------------
// HttpClient

HttpClient::HttpClient(asio::io_context& ctx, ClientConfig config)
    : ctx_(ctx), cfg_(std::move(config)), impl_(std::make_unique<Impl>()) {
  detail::DeadlineSweeper::of(ctx_).set_interval(cfg_.timer_resolution);
  error_code ec;
  impl_->tls.emplace(asio::ssl::context::tls_client);
  impl_->tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                              asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                              asio::ssl::context::no_tlsv1_1,
                          ec);
  if (cfg_.tls_verify) {
    impl_->tls->set_verify_mode(asio::ssl::verify_peer, ec);
    if (!cfg_.tls_ca_file.empty()) {
      impl_->tls->load_verify_file(cfg_.tls_ca_file, ec);
    } else {
      impl_->tls->set_default_verify_paths(ec);
    }
  } else {
    impl_->tls->set_verify_mode(asio::ssl::verify_none, ec);
  }
  if (!ec && !cfg_.tls_cert_file.empty()) {
    impl_->tls->use_certificate_chain_file(cfg_.tls_cert_file, ec);
    if (!ec) {
      impl_->tls->use_private_key_file(cfg_.tls_key_file, asio::ssl::context::pem, ec);
    }
  }
  if (ec) {
    impl_->tls_error = "TLS client setup failed: " + ec.message();
  }
}

HttpClient::~HttpClient() {
  close_idle();
}

size_t HttpClient::idle_connections(const Upstream& up) const {
  const auto it = idle_.find(up.key());
  return it == idle_.end() ? 0 : it->second.size();
}

void HttpClient::close_idle() {
  idle_.clear();
}

std::unique_ptr<ClientConn> HttpClient::checkout(const std::string& key) {
  const auto it = idle_.find(key);
  if (it == idle_.end()) {
    return nullptr;
  }
  auto& pool = it->second;
  const SteadyTime now = std::chrono::steady_clock::now();
  while (!pool.empty()) {
    std::unique_ptr<ClientConn> c = std::move(pool.back());
    pool.pop_back();
    if (now - c->idle_since <= cfg_.pool_idle && looks_alive(*c)) {
      return c;
    }
  }
  return nullptr;
}

void HttpClient::checkin(std::unique_ptr<ClientConn> c) {
  if (!c || c->timed_out || !c->t.socket().is_open()) {
    return;
  }
  c->deactivate();
  c->idle_since = std::chrono::steady_clock::now();
  auto& pool = idle_[c->key];
  if (pool.size() >= cfg_.max_idle_per_upstream) {
    pool.erase(pool.begin());  // the oldest is the most likely to be closed by the server
  }
  pool.push_back(std::move(c));
}

asio::awaitable<HttpResult<std::unique_ptr<ClientConn>>> HttpClient::connect(const Upstream& up,
                                                                             const ClientTimeouts& t) {
  if (up.tls && !impl_->tls_error.empty()) {
    co_return http_error(HttpError::tls, impl_->tls_error);
  }
  tcp::socket sock(ctx_);
  auto& sweeper = detail::DeadlineSweeper::of(ctx_);
  auto conn = up.tls
                  ? std::make_unique<ClientConn>(sweeper, up.key(), Transport(std::move(sock), *impl_->tls))
                  : std::make_unique<ClientConn>(sweeper, up.key(), Transport(std::move(sock)));
  conn->activate();
  conn->set_deadline_after(t.connect);
  const std::string where = up.host + ":" + std::to_string(up.port);
  error_code ec;
  const auto addr = asio::ip::make_address(up.host, ec);
  if (!ec) {
    auto [cec] = co_await conn->t.socket().async_connect(tcp::endpoint(addr, up.port), use_tuple);
    ec = cec;
  } else {
    tcp::resolver resolver(ctx_);
    conn->resolver = &resolver;
    auto [rec, results] = co_await resolver.async_resolve(up.host, std::to_string(up.port), use_tuple);
    conn->resolver = nullptr;
    ec = rec;
    if (!ec) {
      auto [cec, ep] = co_await asio::async_connect(conn->t.socket(), results, use_tuple);
      ec = cec;
    }
  }
  if (ec) {
    auto err = map_error(ec, conn->timed_out, "connect to " + where);
    if (err.code == HttpError::closed) {
      err.code = HttpError::connect_failed;
    }
    co_return err;
  }
  error_code ignored;
  conn->t.socket().set_option(tcp::no_delay(true), ignored);
  if (auto* tls = conn->t.tls()) {
    if (asio::ip::make_address(up.host, ignored), ignored) {
      SSL_set_tlsext_host_name(tls->native_handle(), up.host.c_str());
    }
    if (cfg_.tls_verify) {
      tls->set_verify_callback(asio::ssl::host_name_verification(up.host));
    }
    auto [hec] = co_await tls->async_handshake(asio::ssl::stream_base::client, use_tuple);
    if (hec) {
      auto err = map_error(hec, conn->timed_out, "TLS handshake with " + where);
      if (err.code == HttpError::closed || err.code == HttpError::protocol) {
        err.code = HttpError::tls;
      }
      co_return err;
    }
  }
  conn->clear_deadline();
  ++opened_;
  co_return std::move(conn);
}

asio::awaitable<HttpResult<ClientStream>> HttpClient::start(const Upstream& up, Request& req,
                                                            const ClientTimeouts& t) {
  if (req.find(Field::host) == req.end()) {
    req.set(Field::host, up.host + ":" + std::to_string(up.port));
  }
  if (!req.chunked()) {
    req.prepare_payload();
  }
  const bool expect_continue = t.continue_wait.count() > 0 && !req.chunked() && !req.body().empty();
  if (expect_continue) {
    req.set(Field::expect, "100-continue");
  } else {
    req.erase(Field::expect);  // a client that does not wait for 100 must not ask for it (a proxy)
  }
  const std::string key = up.key();
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<ClientConn> c = checkout(key);
    const bool reused = c != nullptr;
    if (!c) {
      auto r = co_await connect(up, t);
      if (!r) {
        if (attempt > 0 && r.error().code == HttpError::connect_failed) {
          // The reused connection closed on this request and the server now refuses new ones:
          // most likely it died of the request, which the caller must see as a close.
          co_return http_error(
              HttpError::closed,
              "the connection closed before any answer and reconnecting failed: " + r.error().message);
        }
        co_return r.error();
      }
      c = std::move(r.value());
    } else {
      c->activate();
    }
    const bool may_retry = reused && attempt == 0 && cfg_.retry_stale;
    c->set_deadline_after(expect_continue ? t.continue_wait : t.header);
    error_code wec;
    if (req.chunked()) {
      auto [e, n] = co_await beast_http::async_write(c->t, req, use_tuple);
      wec = e;
    } else {
      // One gather write: header bytes in the connection's reused buffer, then the body (after
      // the server's 100 Continue when expect_continue).
      detail::serialize_header(req.base(), c->whdr);
      const std::array<asio::const_buffer, 2> bufs{
          asio::buffer(c->whdr), expect_continue ? asio::const_buffer() : asio::buffer(req.body())};
      auto [e, n] = co_await asio::async_write(c->t, bufs, use_tuple);
      wec = e;
    }
    if (wec) {
      if (may_retry && !c->timed_out && is_stale(wec)) {
        continue;
      }
      co_return map_error(wec, c->timed_out, "writing request");
    }
    if (expect_continue) {
      HeadParser head;
      head.header_limit(static_cast<std::uint32_t>(cfg_.max_header_bytes));
      auto [iec, in] = co_await beast_http::async_read_header(c->t, c->buf, head, use_tuple);
      if (iec) {
        if (may_retry && !c->timed_out && c->buf.size() == 0 && is_stale(iec)) {
          continue;
        }
        if (c->timed_out) {
          co_return http_error(HttpError::connect_failed, "no 100 Continue from " + key + " within " +
                                                              std::to_string(t.continue_wait.count()) +
                                                              " ms (the body was not sent)");
        }
        co_return map_error(iec, false, "reading 100 Continue");
      }
      if (head.get().result_int() / 100 != 1) {
        // A final answer before the body went out (a refusal): it is the response. The server
        // may still expect the body, so the connection is not pooled.
        auto st = std::make_unique<ClientStream::State>(impl_->scratch, std::move(head));
        st->client = this;
        st->timeouts = t;
        st->reusable = false;
        st->parser.body_limit(boost::none);
        c->clear_deadline();
        st->conn = std::move(c);
        co_return ClientStream(std::move(st));
      }
      c->set_deadline_after(t.header);
      auto [bec, bn] = co_await asio::async_write(c->t, asio::buffer(req.body()), use_tuple);
      if (bec) {
        co_return map_error(bec, c->timed_out, "writing request body");
      }
    }
    auto st = std::make_unique<ClientStream::State>(impl_->scratch);
    st->client = this;
    st->timeouts = t;
    st->parser.header_limit(static_cast<std::uint32_t>(cfg_.max_header_bytes));
    st->parser.body_limit(boost::none);  // send() bounds buffered bodies itself
    if (req.method() == Verb::head) {
      st->parser.skip(true);
    }
    auto [rec, rn] = co_await beast_http::async_read_header(c->t, c->buf, st->parser, use_tuple);
    if (rec) {
      if (may_retry && !c->timed_out && c->buf.size() == 0 && is_stale(rec)) {
        continue;
      }
      co_return map_error(rec, c->timed_out, "reading response headers");
    }
    c->clear_deadline();
    st->conn = std::move(c);
    co_return ClientStream(std::move(st));
  }
}

asio::awaitable<HttpResult<ClientStream>> HttpClient::stream(const Upstream& up, Request req) {
  auto r = co_await start(up, req, cfg_.timeouts);
  co_return r;
}

asio::awaitable<HttpResult<ClientStream>> HttpClient::stream(const Upstream& up, Request req,
                                                             ClientTimeouts t) {
  auto r = co_await start(up, req, t);
  co_return r;
}

asio::awaitable<HttpResult<Response>> HttpClient::send(const Upstream& up, Request req) {
  auto r = co_await send(up, std::move(req), cfg_.timeouts);
  co_return r;
}

asio::awaitable<HttpResult<Response>> HttpClient::send(const Upstream& up, Request req, ClientTimeouts t) {
  auto started = co_await start(up, req, t);
  if (!started) {
    co_return started.error();
  }
  ClientStream s = std::move(started.value());
  s.s_->body_deadline = std::chrono::steady_clock::now() + t.body;
  auto body = co_await s.read_all();
  if (!body) {
    co_return body.error();
  }
  Response res(std::move(s.s_->parser.get().base()));
  res.body() = std::move(body.value());
  co_return res;
}

}  // namespace cgn::http
