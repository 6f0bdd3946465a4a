#include "kvcached/local_client.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "kvcached/fast_path.h"

namespace cgn::kvcached {

std::string_view to_string(ClientError e) {
  switch (e) {
    case ClientError::kConnect:
      return "connect";
    case ClientError::kNotFound:
      return "not_found";
    case ClientError::kTooLarge:
      return "too_large";
    case ClientError::kNoSpace:
      return "no_space";
    case ClientError::kBusy:
      return "busy";
    case ClientError::kInvalid:
      return "invalid";
    case ClientError::kProtocol:
      return "protocol";
    case ClientError::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

namespace {

ClientError client_error(FrameStatus s) {
  switch (s) {
    case FrameStatus::kNotFound:
      return ClientError::kNotFound;
    case FrameStatus::kTooLarge:
      return ClientError::kTooLarge;
    case FrameStatus::kNoSpace:
      return ClientError::kNoSpace;
    case FrameStatus::kBusy:
      return ClientError::kBusy;
    case FrameStatus::kInvalid:
      return ClientError::kInvalid;
    case FrameStatus::kOk:
    case FrameStatus::kUnavailable:
      break;
  }
  return ClientError::kUnavailable;
}

bool send_request(int fd, const Request& req) {
  const std::vector<uint8_t> out = encode(req);
  ssize_t n;
  do {
    n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(out.size());
}

// A batch answer with one entry per request key.
Result<Response, ClientError> exchange_batch(int fd, const Request& req, size_t count);

// Sends one request and reads its answer (and, for HELLO, the fd passed with it).
Result<Response, ClientError> exchange(int fd, const Request& req, int* passed_fd = nullptr) {
  int recv_flags = MSG_CMSG_CLOEXEC;
  std::string send_error;
  if (!send_request(fd, req)) {
    // The daemon may have answered and closed first (a refused connection): read what it said.
    send_error = fmt::format("{}: send: {}", to_string(req.op), std::generic_category().message(errno));
    recv_flags |= MSG_DONTWAIT;
  }
  uint8_t buf[kMaxFrameBytes];
  ssize_t n;
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  do {
    n = ::recvmsg(fd, &msg, recv_flags);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    return make_error(ClientError::kProtocol,
                      !send_error.empty()
                          ? send_error
                          : fmt::format("{}: the daemon closed the connection", to_string(req.op)));
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c), sizeof got);
      if (passed_fd != nullptr) {
        *passed_fd = got;
      } else {
        ::close(got);
      }
    }
  }
  auto resp = decode_response(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
  if (!resp) {
    return make_error(ClientError::kProtocol, resp.error().message);
  }
  if (resp->status != FrameStatus::kOk) {
    return make_error(client_error(resp->status),
                      fmt::format("{}: {} ({})", to_string(req.op), resp->message, to_string(resp->status)));
  }
  if (resp->op != req.op) {
    return make_error(ClientError::kProtocol,
                      fmt::format("{}: an answer to {}", to_string(req.op), to_string(resp->op)));
  }
  return std::move(*resp);
}

Result<Response, ClientError> exchange_batch(int fd, const Request& req, size_t count) {
  auto resp = exchange(fd, req);
  if (resp && resp->entries.size() != count) {
    return make_error(ClientError::kProtocol, fmt::format("{}: {} answers to {} keys", to_string(req.op),
                                                          resp->entries.size(), count));
  }
  return resp;
}

}  // namespace

BlockView::BlockView(BlockView&& other) noexcept
    : client_(other.client_), handle_(other.handle_), tier_(other.tier_), data_(other.data_) {
  other.client_ = nullptr;
}

BlockView& BlockView::operator=(BlockView&& other) noexcept {
  if (this != &other) {
    release();
    client_ = other.client_;
    handle_ = other.handle_;
    tier_ = other.tier_;
    data_ = other.data_;
    other.client_ = nullptr;
  }
  return *this;
}

BlockView::~BlockView() {
  release();
}

void BlockView::release() {
  if (client_ != nullptr) {
    client_->release(std::span<const uint64_t>(&handle_, 1));
    client_ = nullptr;
    data_ = {};
  }
}

Result<std::unique_ptr<LocalClient>, ClientError> LocalClient::connect(const std::string& socket_path,
                                                                       LocalConnectOptions options) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) {
    return make_error(ClientError::kConnect,
                      fmt::format("socket path \"{}\" is empty or too long", socket_path));
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  std::unique_ptr<LocalClient> c(new LocalClient());
  c->fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (c->fd_ < 0 || ::connect(c->fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return make_error(ClientError::kConnect,
                      fmt::format("{}: {}", socket_path, std::generic_category().message(errno)));
  }
  Request hello;
  hello.op = Op::kHello;
  hello.version = kFastPathVersion;
  int arena_fd = -1;
  auto resp = exchange(c->fd_, hello, &arena_fd);
  if (!resp) {
    if (arena_fd >= 0) {
      ::close(arena_fd);
    }
    return make_error(resp.error().code == ClientError::kBusy ? ClientError::kBusy : ClientError::kConnect,
                      fmt::format("{}: {}", socket_path, resp.error().message));
  }
  if (arena_fd < 0 || resp->arena_bytes == 0) {
    return make_error(ClientError::kProtocol, fmt::format("{}: HELLO came without the arena", socket_path));
  }
  const int populate = options.prefault ? MAP_POPULATE : 0;
  void* p = ::mmap(nullptr, resp->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | populate, arena_fd, 0);
  ::close(arena_fd);
  if (p == MAP_FAILED) {
    return make_error(ClientError::kConnect, fmt::format("{}: mmap of the arena: {}", socket_path,
                                                         std::generic_category().message(errno)));
  }
  c->arena_rw_ = static_cast<uint8_t*>(p);
  c->arena_ = c->arena_rw_;
  c->arena_bytes_ = resp->arena_bytes;
  return c;
}

LocalClient::~LocalClient() {
  if (arena_rw_ != nullptr) {
    ::munmap(arena_rw_, arena_bytes_);
  }
  if (fd_ >= 0) {
    ::close(fd_);  // the daemon drops whatever this connection still holds
  }
}

Status<ClientError> LocalClient::put(const kvcache::BlockKey& key, std::span<const uint8_t> value) {
  Request start;
  start.op = Op::kPutStart;
  start.key = key;
  start.length = value.size();
  auto resp = exchange(fd_, start);
  if (!resp) {
    return resp.error();
  }
  if (resp->already_resident) {
    return Ok{};
  }
  if (resp->offset > arena_bytes_ || value.size() > arena_bytes_ - resp->offset) {
    return make_error(ClientError::kProtocol, "PUT_START: an offset outside the arena");
  }
  std::memcpy(arena_rw_ + resp->offset, value.data(), value.size());
  Request end;
  end.op = Op::kPutEnd;
  end.key = key;
  auto done = exchange(fd_, end);
  if (!done) {
    return done.error();
  }
  return Ok{};
}

Result<BlockView, ClientError> LocalClient::view(const kvcache::BlockKey& key) {
  Request get;
  get.op = Op::kGet;
  get.key = key;
  auto resp = exchange(fd_, get);
  if (!resp) {
    return resp.error();
  }
  BlockView v;
  v.client_ = this;
  v.handle_ = resp->handle;
  v.tier_ = resp->tier;
  if (resp->offset > arena_bytes_ || resp->length > arena_bytes_ - resp->offset) {
    return make_error(ClientError::kProtocol, "GET: a block outside the arena");  // v releases it
  }
  v.data_ = std::span<const uint8_t>(arena_ + resp->offset, resp->length);
  return v;
}

Result<uint64_t, ClientError> LocalClient::get(const kvcache::BlockKey& key, std::span<uint8_t> out) {
  auto v = view(key);
  if (!v) {
    return v.error();
  }
  const auto bytes = v->data();
  if (bytes.size() > out.size()) {
    return make_error(ClientError::kTooLarge,
                      fmt::format("the block has {} bytes; the buffer {}", bytes.size(), out.size()));
  }
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return static_cast<uint64_t>(bytes.size());
}

Result<LocalLookup, ClientError> LocalClient::lookup(std::span<const kvcache::BlockKey> keys,
                                                     uint32_t lease_ms) {
  if (keys.empty() || keys.size() > kMaxLookupKeys) {
    return make_error(ClientError::kInvalid,
                      fmt::format("LOOKUP of {} keys; 1 to {}", keys.size(), kMaxLookupKeys));
  }
  Request req;
  req.op = Op::kLookup;
  req.lease_ms = lease_ms;
  req.keys.assign(keys.begin(), keys.end());
  auto resp = exchange(fd_, req);
  if (!resp) {
    return resp.error();
  }
  if (resp->tiers.size() > keys.size()) {
    return make_error(ClientError::kProtocol, "LOOKUP: more tiers than keys");
  }
  return LocalLookup{std::move(resp->tiers), resp->lease_until_unix_ms};
}

void LocalClient::release(std::span<const uint64_t> handles) {
  Request req;
  req.op = Op::kReleaseMany;
  req.no_reply = true;
  req.handles.assign(handles.begin(), handles.end());
  (void)send_request(fd_, req);  // a broken connection releases everything anyway
}

Result<std::vector<KeyResult>, ClientError> LocalClient::put_many(
    std::span<const kvcache::BlockKey> keys, std::span<const std::span<const uint8_t>> values) {
  if (keys.size() != values.size()) {
    return make_error(ClientError::kInvalid,
                      fmt::format("put_many: {} keys and {} values", keys.size(), values.size()));
  }
  std::vector<KeyResult> results(keys.size());
  for (size_t first = 0; first < keys.size(); first += kMaxBatchKeys) {
    const size_t n = std::min(kMaxBatchKeys, keys.size() - first);
    Request start;
    start.op = Op::kPutStartMany;
    for (size_t i = 0; i < n; ++i) {
      start.puts.push_back({keys[first + i], values[first + i].size()});
    }
    auto started = exchange_batch(fd_, start, n);
    if (!started) {
      return started.error();
    }
    Request end;
    end.op = Op::kPutEndMany;
    std::vector<size_t> ended;  // end.keys[j] is key first + ended[j]
    for (size_t i = 0; i < n; ++i) {
      const BatchEntry& e = started->entries[i];
      if (e.status != FrameStatus::kOk) {
        results[first + i].error = client_error(e.status);
        continue;
      }
      if (e.already_resident) {
        continue;
      }
      const auto value = values[first + i];
      if (e.offset > arena_bytes_ || value.size() > arena_bytes_ - e.offset) {
        return make_error(ClientError::kProtocol, "PUT_START_MANY: an offset outside the arena");
      }
      std::memcpy(arena_rw_ + e.offset, value.data(), value.size());
      end.keys.push_back(keys[first + i]);
      ended.push_back(first + i);
    }
    if (end.keys.empty()) {
      continue;
    }
    auto done = exchange_batch(fd_, end, end.keys.size());
    if (!done) {
      return done.error();
    }
    for (size_t j = 0; j < ended.size(); ++j) {
      if (done->entries[j].status != FrameStatus::kOk) {
        results[ended[j]].error = client_error(done->entries[j].status);
      }
    }
  }
  return results;
}

Result<std::vector<KeyResult>, ClientError> LocalClient::get_many(std::span<const kvcache::BlockKey> keys,
                                                                  std::span<const std::span<uint8_t>> outs) {
  if (keys.size() != outs.size()) {
    return make_error(ClientError::kInvalid,
                      fmt::format("get_many: {} keys and {} buffers", keys.size(), outs.size()));
  }
  std::vector<KeyResult> results(keys.size());
  for (size_t first = 0; first < keys.size(); first += kMaxBatchKeys) {
    const size_t n = std::min(kMaxBatchKeys, keys.size() - first);
    Request get;
    get.op = Op::kGetMany;
    get.keys.assign(keys.begin() + static_cast<ptrdiff_t>(first),
                    keys.begin() + static_cast<ptrdiff_t>(first + n));
    auto resp = exchange_batch(fd_, get, n);
    if (!resp) {
      return resp.error();
    }
    std::vector<uint64_t> pinned;
    bool outside = false;
    for (size_t i = 0; i < n; ++i) {
      const BatchEntry& e = resp->entries[i];
      KeyResult& r = results[first + i];
      if (e.status != FrameStatus::kOk) {
        r.error = client_error(e.status);
        continue;
      }
      pinned.push_back(e.handle);
      if (e.offset > arena_bytes_ || e.length > arena_bytes_ - e.offset) {
        outside = true;
        continue;
      }
      r.length = e.length;
      r.tier = e.tier;
      if (e.length > outs[first + i].size()) {
        r.error = ClientError::kTooLarge;
        continue;
      }
      std::memcpy(outs[first + i].data(), arena_ + e.offset, e.length);
    }
    if (!pinned.empty()) {
      release(pinned);
    }
    if (outside) {
      return make_error(ClientError::kProtocol, "GET_MANY: a block outside the arena");
    }
  }
  return results;
}

}  // namespace cgn::kvcached
