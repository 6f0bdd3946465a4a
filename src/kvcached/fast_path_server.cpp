#include "kvcached/fast_path_server.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "core/log.h"
#include "kvcached/fast_path.h"
#include "kvcached/kv_service.h"
#include "kvcached/kvcached_metrics.h"

namespace cgn::kvcached {

struct FastPathServer::Conn {
  int fd = -1;
  std::thread thread;
  std::atomic<bool> done{false};
};

namespace {

Error<FastPathError> listen_error(const std::string& path, const std::string& what) {
  return make_error(FastPathError::kListen, fmt::format("fast path socket {}: {}", path, what));
}

std::string errno_text() {
  return std::strerror(errno);
}

bool fill_addr(const std::string& path, sockaddr_un& addr) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return false;
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return true;
}

// Whether a daemon answers on the socket file at `path`.
bool someone_listens(const sockaddr_un& addr) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return live;
}

bool send_frame(int fd, const Response& r, int pass_fd = -1) {
  const std::vector<uint8_t> bytes = encode(r);
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    std::memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(bytes.size());
}

}  // namespace

FastPathServer::FastPathServer(kvcache::BlockStore& store, FastPathLimits limits, KvcachedMetrics& metrics,
                               const Clock& clock)
    : store_(store), limits_(limits), metrics_(metrics), clock_(clock) {}

Result<std::unique_ptr<FastPathServer>, FastPathError> FastPathServer::start(const std::string& path,
                                                                             kvcache::BlockStore& store,
                                                                             FastPathLimits limits,
                                                                             KvcachedMetrics& metrics,
                                                                             const Clock& clock) {
  sockaddr_un addr{};
  if (!fill_addr(path, addr)) {
    return listen_error(path, fmt::format("the path must be 1 to {} bytes", sizeof addr.sun_path - 1));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return listen_error(path, "exists and is not a socket (not replaced)");
    }
    if (someone_listens(addr)) {
      return listen_error(path, "another daemon is serving on it");
    }
    ::unlink(path.c_str());  // stale: left by a daemon that died
  }
  std::unique_ptr<FastPathServer> s(new FastPathServer(store, limits, metrics, clock));
  s->path_ = path;
  s->listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) {
    return listen_error(path, "socket: " + errno_text());
  }
  if (::bind(s->listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return listen_error(path, "bind: " + errno_text());
  }
  if (::chmod(path.c_str(), 0660) != 0 || ::listen(s->listen_fd_, 64) != 0) {
    const std::string why = errno_text();
    ::unlink(path.c_str());
    return listen_error(path, why);
  }
  s->wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (s->wake_fd_ < 0) {
    ::unlink(path.c_str());
    return listen_error(path, "eventfd: " + errno_text());
  }
  s->acceptor_ = std::thread([p = s.get()] { p->accept_loop(); });
  return s;
}

FastPathServer::~FastPathServer() {
  stop();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
  }
  if (wake_fd_ >= 0) {
    ::close(wake_fd_);
  }
}

void FastPathServer::stop() {
  {
    const std::lock_guard lock(mu_);
    if (stopping_) {
      return;
    }
    stopping_ = true;
    for (auto& c : conns_) {
      ::shutdown(c->fd, SHUT_RDWR);  // wakes its thread's recv
    }
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
  }
  if (acceptor_.joinable()) {
    acceptor_.join();
  }
  std::list<std::unique_ptr<Conn>> conns;
  {
    const std::lock_guard lock(mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    c->thread.join();
    ::close(c->fd);
  }
  if (!path_.empty()) {
    ::unlink(path_.c_str());
  }
}

void FastPathServer::reap_finished() {
  std::list<std::unique_ptr<Conn>> finished;
  {
    const std::lock_guard lock(mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done.load()) {
        finished.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    c->thread.join();
    ::close(c->fd);
  }
}

void FastPathServer::accept_loop() {
  auto logger = log::get("kvcached");
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) {
      CGN_LOG_ERROR(logger, "fast path accept failed", log::kv("error", errno_text()));
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) {
      return;
    }
    reap_finished();
    if ((fds[0].revents & POLLIN) == 0) {
      continue;
    }
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    const std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    const auto live =
        std::count_if(conns_.begin(), conns_.end(), [](const auto& c) { return !c->done.load(); });
    if (static_cast<size_t>(live) >= limits_.max_connections) {
      send_frame(fd, error_response(Op::kHello, FrameStatus::kBusy,
                                    fmt::format("too many fast path connections (max_connections = {})",
                                                limits_.max_connections)));
      ::close(fd);
      metrics_.fast_path_connection_refused();
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    Conn* raw = c.get();
    conns_.push_back(std::move(c));
    raw->thread = std::thread([this, raw] {
      metrics_.fast_path_connection_opened();
      serve(*raw);
      metrics_.fast_path_connection_closed();
      raw->done.store(true);
    });
  }
}

// What one connection holds; dropped (puts aborted, pins released) when it closes.
struct FastPathServer::Session {
  std::map<kvcache::BlockKey, kvcache::PutHandle> puts;
  std::map<uint64_t, kvcache::ReadHandle> reads;
  uint64_t next_handle = 1;
  bool hello = false;
  int pass_fd = -1;  // set by HELLO: the fd to send with the answer

  size_t open() const { return puts.size() + reads.size(); }
};

namespace {

Response too_many_handles(Op op, size_t open) {
  return error_response(
      op, FrameStatus::kBusy,
      fmt::format("{} open puts and gets on this connection (max_handles_per_connection)", open));
}

}  // namespace

Response FastPathServer::handle(Session& s, const Request& r) {
  Response resp;
  resp.op = r.op;
  if (!s.hello && r.op != Op::kHello) {
    return error_response(r.op, FrameStatus::kInvalid, "HELLO first");
  }
  switch (r.op) {
    case Op::kHello:
      if (r.version != kFastPathVersion) {
        return error_response(
            r.op, FrameStatus::kInvalid,
            fmt::format("protocol version {}; this daemon speaks {}", r.version, kFastPathVersion));
      }
      s.hello = true;
      resp.version = kFastPathVersion;
      resp.arena_bytes = store_.arena_bytes();
      s.pass_fd = store_.arena_fd();
      return resp;
    case Op::kPutStart:
      return put_start(s, r);
    case Op::kPutEnd: {
      auto it = s.puts.find(r.key);
      if (it == s.puts.end()) {
        return error_response(r.op, FrameStatus::kInvalid, "no open put of the key on this connection");
      }
      kvcache::PutHandle h = std::move(it->second);
      s.puts.erase(it);
      if (auto st = store_.put_end(std::move(h)); !st) {
        return error_response(r.op, frame_status(st.error().code), st.error().message);
      }
      return resp;
    }
    case Op::kPutAbort:
      if (s.puts.erase(r.key) == 0) {
        return error_response(r.op, FrameStatus::kInvalid, "no open put of the key on this connection");
      }
      return resp;
    case Op::kGet:
      return get(s, r);
    case Op::kRelease:
      if (s.reads.erase(r.handle) == 0) {
        return error_response(r.op, FrameStatus::kInvalid,
                              fmt::format("no open get with handle {}", r.handle));
      }
      return resp;
    case Op::kLookup: {
      const kvcache::LookupResult found =
          store_.lookup(r.keys, static_cast<Nanos>(r.lease_ms) * kNanosPerMilli);
      resp.tiers = found.tiers;
      resp.lease_until_unix_ms = to_unix_ms(found.lease_until, clock_);
      return resp;
    }
  }
  return error_response(r.op, FrameStatus::kInvalid, "unknown op");
}

Response FastPathServer::put_start(Session& s, const Request& r) {
  if (s.puts.count(r.key) != 0) {
    return error_response(r.op, FrameStatus::kBusy, "this connection already has a put of the key open");
  }
  if (s.open() >= limits_.max_handles) {
    return too_many_handles(r.op, s.open());
  }
  if (r.length == 0) {
    return error_response(r.op, FrameStatus::kInvalid, "length must be > 0");
  }
  auto h = store_.put_start(r.key, r.length);
  if (!h) {
    return error_response(r.op, frame_status(h.error().code), h.error().message);
  }
  Response resp;
  resp.op = r.op;
  if (!h->has_value()) {
    resp.already_resident = true;  // nothing to write, no PUT_END
    return resp;
  }
  resp.offset = (*h)->arena_offset();
  s.puts.emplace(r.key, std::move(**h));
  return resp;
}

Response FastPathServer::get(Session& s, const Request& r) {
  if (s.open() >= limits_.max_handles) {
    return too_many_handles(r.op, s.open());
  }
  auto h = store_.get(r.key, /*pin_in_ram=*/true);
  if (!h) {
    return error_response(r.op, frame_status(h.error().code), h.error().message);
  }
  if (!h->arena_offset()) {
    return error_response(r.op, FrameStatus::kUnavailable, "the block could not be pinned in the arena");
  }
  Response resp;
  resp.op = r.op;
  resp.handle = s.next_handle++;
  resp.offset = *h->arena_offset();
  resp.length = h->data().size();
  resp.tier = h->tier();
  s.reads.emplace(resp.handle, std::move(*h));
  return resp;
}

void FastPathServer::serve(Conn& conn) {
  Session session;
  std::vector<uint8_t> buf(kMaxFrameBytes + 1);
  for (;;) {
    ssize_t n;
    do {
      n = ::recv(conn.fd, buf.data(), buf.size(), MSG_TRUNC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      return;  // closed by the peer, or stop()
    }
    Response resp;
    if (static_cast<size_t>(n) > kMaxFrameBytes) {
      resp = error_response(Op::kHello, FrameStatus::kInvalid,
                            fmt::format("a {}-byte frame; at most {}", n, kMaxFrameBytes));
    } else if (auto req = decode_request(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
               !req) {
      resp = error_response(Op::kHello, FrameStatus::kInvalid, req.error().message);
    } else {
      resp = handle(session, *req);
    }
    metrics_.fast_path_request(to_string(resp.op), to_string(resp.status));
    const int pass_fd = std::exchange(session.pass_fd, -1);
    if (!send_frame(conn.fd, resp, pass_fd)) {
      return;
    }
  }
}

}  // namespace cgn::kvcached
