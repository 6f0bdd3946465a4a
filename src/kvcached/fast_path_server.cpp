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
#include <chrono>
#include <cstring>
#include <map>
#include <system_error>
#include <utility>
#include <vector>

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
  return std::generic_category().message(errno);
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

namespace {

// A refused connection waits here (its BUSY answer sent, writes shut) until the client's HELLO
// has been read, then closes: closing a Unix socket with unread data resets the peer, which
// would lose the answer.
struct Refused {
  int fd;
  std::chrono::steady_clock::time_point close_by;
};
constexpr size_t kMaxRefused = 64;

}  // namespace

void FastPathServer::accept_loop() {
  auto logger = log::get("kvcached");
  std::vector<Refused> refused;
  for (;;) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    for (const auto& r : refused) {
      fds.push_back({r.fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), refused.empty() ? 1000 : 100) < 0 && errno != EINTR) {
      CGN_LOG_ERROR(logger, "fast path accept failed", log::kv("error", errno_text()));
      break;
    }
    if ((fds[1].revents & POLLIN) != 0) {
      break;
    }
    reap_finished();
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = refused.size(); i-- > 0;) {
      if (fds[2 + i].revents != 0 || now >= refused[i].close_by) {
        uint8_t drain[kMaxFrameBytes];
        while (::recv(refused[i].fd, drain, sizeof drain, MSG_DONTWAIT) > 0) {
        }
        ::close(refused[i].fd);
        refused.erase(refused.begin() + static_cast<ptrdiff_t>(i));
      }
    }
    if ((fds[0].revents & POLLIN) == 0) {
      continue;
    }
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0 && !admit(fd)) {
      send_frame(fd, error_response(Op::kHello, FrameStatus::kBusy,
                                    fmt::format("too many fast path connections (max_connections = {})",
                                                limits_.max_connections)));
      metrics_.fast_path_connection_refused();
      ::shutdown(fd, SHUT_WR);
      if (refused.size() < kMaxRefused) {
        refused.push_back({fd, now + std::chrono::seconds(2)});
      } else {
        ::close(fd);
      }
    }
  }
  for (const auto& r : refused) {
    ::close(r.fd);
  }
}

bool FastPathServer::admit(int fd) {
  const std::lock_guard lock(mu_);
  if (stopping_) {
    ::close(fd);
    return true;  // nothing to answer: the daemon is going away
  }
  const auto live =
      std::count_if(conns_.begin(), conns_.end(), [](const auto& c) { return !c->done.load(); });
  if (static_cast<size_t>(live) >= limits_.max_connections) {
    return false;
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
  return true;
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

std::string too_many_handles(size_t open) {
  return fmt::format("{} open puts and gets on this connection (max_handles_per_connection)", open);
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
      if (r.version < kFastPathMinVersion || r.version > kFastPathVersion) {
        return error_response(r.op, FrameStatus::kInvalid,
                              fmt::format("protocol version {}; this daemon speaks {} to {}", r.version,
                                          kFastPathMinVersion, kFastPathVersion));
      }
      s.hello = true;
      resp.version = r.version;
      resp.arena_bytes = store_.arena_bytes();
      s.pass_fd = store_.arena_fd();
      return resp;
    case Op::kPutStart: {
      std::string why;
      const BatchEntry e = put_one(s, r.key, r.length, why);
      if (e.status != FrameStatus::kOk) {
        return error_response(r.op, e.status, std::move(why));
      }
      resp.offset = e.offset;
      resp.already_resident = e.already_resident;
      return resp;
    }
    case Op::kPutEnd: {
      std::string why;
      if (const BatchEntry e = put_end_one(s, r.key, why); e.status != FrameStatus::kOk) {
        return error_response(r.op, e.status, std::move(why));
      }
      return resp;
    }
    case Op::kPutAbort:
      if (s.puts.erase(r.key) == 0) {
        return error_response(r.op, FrameStatus::kInvalid, "no open put of the key on this connection");
      }
      return resp;
    case Op::kGet: {
      std::string why;
      const BatchEntry e = get_one(s, r.key, why);
      if (e.status != FrameStatus::kOk) {
        return error_response(r.op, e.status, std::move(why));
      }
      resp.handle = e.handle;
      resp.offset = e.offset;
      resp.length = e.length;
      resp.tier = e.tier;
      return resp;
    }
    case Op::kGetMany:
    case Op::kPutStartMany:
    case Op::kPutEndMany:
    case Op::kReleaseMany:
      return batch(s, r);
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

BatchEntry FastPathServer::put_one(Session& s, const kvcache::BlockKey& key, uint64_t length,
                                   std::string& why) {
  BatchEntry e;
  if (s.puts.count(key) != 0) {
    e.status = FrameStatus::kBusy;
    why = "this connection already has a put of the key open";
    return e;
  }
  if (s.open() >= limits_.max_handles) {
    e.status = FrameStatus::kBusy;
    why = too_many_handles(s.open());
    return e;
  }
  if (length == 0) {
    e.status = FrameStatus::kInvalid;
    why = "length must be > 0";
    return e;
  }
  auto h = store_.put_start(key, length);
  if (!h) {
    e.status = frame_status(h.error().code);
    why = h.error().message;
    return e;
  }
  if (!h->has_value()) {
    e.already_resident = true;  // nothing to write, no PUT_END
    return e;
  }
  e.offset = (*h)->arena_offset();
  s.puts.emplace(key, std::move(**h));
  return e;
}

BatchEntry FastPathServer::put_end_one(Session& s, const kvcache::BlockKey& key, std::string& why) {
  BatchEntry e;
  auto it = s.puts.find(key);
  if (it == s.puts.end()) {
    e.status = FrameStatus::kInvalid;
    why = "no open put of the key on this connection";
    return e;
  }
  kvcache::PutHandle h = std::move(it->second);
  s.puts.erase(it);
  if (auto st = store_.put_end(std::move(h)); !st) {
    e.status = frame_status(st.error().code);
    why = st.error().message;
  }
  return e;
}

BatchEntry FastPathServer::get_one(Session& s, const kvcache::BlockKey& key, std::string& why) {
  BatchEntry e;
  if (s.open() >= limits_.max_handles) {
    e.status = FrameStatus::kBusy;
    why = too_many_handles(s.open());
    return e;
  }
  auto h = store_.get(key, /*pin_in_ram=*/true);
  if (!h) {
    e.status = frame_status(h.error().code);
    why = h.error().message;
    return e;
  }
  if (!h->arena_offset()) {
    e.status = FrameStatus::kUnavailable;
    why = "the block could not be pinned in the arena";
    return e;
  }
  e.handle = s.next_handle++;
  e.offset = *h->arena_offset();
  e.length = h->data().size();
  e.tier = h->tier();
  s.reads.emplace(e.handle, std::move(*h));
  return e;
}

Response FastPathServer::batch(Session& s, const Request& r) {
  Response resp;
  resp.op = r.op;
  std::string why;  // per-key messages do not travel in batch answers
  switch (r.op) {
    case Op::kGetMany:
      for (const auto& k : r.keys) {
        resp.entries.push_back(get_one(s, k, why));
      }
      break;
    case Op::kPutStartMany:
      for (const auto& p : r.puts) {
        resp.entries.push_back(put_one(s, p.key, p.length, why));
      }
      break;
    case Op::kPutEndMany:
      for (const auto& k : r.keys) {
        resp.entries.push_back(put_end_one(s, k, why));
      }
      break;
    case Op::kReleaseMany:
      for (const auto h : r.handles) {
        BatchEntry e;
        e.status = s.reads.erase(h) == 0 ? FrameStatus::kInvalid : FrameStatus::kOk;
        resp.entries.push_back(e);
      }
      break;
    default:
      return error_response(r.op, FrameStatus::kInvalid, "not a batch op");
  }
  return resp;
}

namespace {

// The status a frame is counted under: its own, or for a batch answer the first key's that is not
// OK (OK when every key is).
FrameStatus counted_status(const Response& r) {
  if (r.status != FrameStatus::kOk) {
    return r.status;
  }
  for (const auto& e : r.entries) {
    if (e.status != FrameStatus::kOk) {
      return e.status;
    }
  }
  return FrameStatus::kOk;
}

}  // namespace

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
    bool reply = true;
    if (static_cast<size_t>(n) > kMaxFrameBytes) {
      resp = error_response(Op::kHello, FrameStatus::kInvalid,
                            fmt::format("a {}-byte frame; at most {}", n, kMaxFrameBytes));
    } else if (auto req = decode_request(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
               !req) {
      resp = error_response(Op::kHello, FrameStatus::kInvalid, req.error().message);
    } else {
      resp = handle(session, *req);
      reply = !(req->op == Op::kReleaseMany && req->no_reply);
    }
    metrics_.fast_path_request(to_string(resp.op), to_string(counted_status(resp)));
    if (!reply) {
      continue;
    }
    const int pass_fd = std::exchange(session.pass_fd, -1);
    if (!send_frame(conn.fd, resp, pass_fd)) {
      return;
    }
  }
}

}  // namespace cgn::kvcached
