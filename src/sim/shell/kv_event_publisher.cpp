#include "sim/shell/kv_event_publisher.h"

#include <dlfcn.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace cgn::sim {

namespace {

// libzmq is loaded when a publisher starts, not linked: an instance without KV events keeps its
// footprint (libzmq and its dependencies are ~2 MB of resident library pages) and runs where
// libzmq is not installed. decltype on the declarations from zmq.h keeps the signatures exact.
// clang-format off
#define CGN_ZMQ_FUNCS(X)                                                                    \
  X(zmq_bind) X(zmq_close) X(zmq_connect) X(zmq_ctx_new) X(zmq_ctx_term) X(zmq_errno)        \
  X(zmq_getsockopt) X(zmq_msg_close) X(zmq_msg_data) X(zmq_msg_init) X(zmq_msg_more)         \
  X(zmq_msg_recv) X(zmq_msg_size) X(zmq_poll) X(zmq_send) X(zmq_setsockopt) X(zmq_socket)    \
  X(zmq_strerror)
// clang-format on

struct ZmqApi {
#define CGN_ZMQ_DECL(f) decltype(&::f) f = nullptr;
  CGN_ZMQ_FUNCS(CGN_ZMQ_DECL)
#undef CGN_ZMQ_DECL
};

ZmqApi Z;

// Loads libzmq.so.5 once; "" or why not.
std::string load_zmq() {
  static const std::string err = [] {
    void* h = ::dlopen("libzmq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      return std::string("cannot load libzmq.so.5 (Debian libzmq5): ") + (e != nullptr ? e : "");
    }
    std::string missing;
#define CGN_ZMQ_LOAD(f)                                   \
  Z.f = reinterpret_cast<decltype(&::f)>(::dlsym(h, #f)); \
  if (Z.f == nullptr) {                                   \
    missing += " " #f;                                    \
  }
    CGN_ZMQ_FUNCS(CGN_ZMQ_LOAD)
#undef CGN_ZMQ_LOAD
    return missing.empty() ? std::string() : "libzmq.so.5 lacks" + missing;
  }();
  return err;
}

std::string zmq_err(const std::string& what) {
  return what + ": " + Z.zmq_strerror(Z.zmq_errno());
}

// Binds or connects by vLLM's rule; returns "" or an error.
std::string attach(void* sock, const std::string& endpoint, bool bind) {
  const int rc = bind ? Z.zmq_bind(sock, endpoint.c_str()) : Z.zmq_connect(sock, endpoint.c_str());
  return rc == 0 ? "" : zmq_err(std::string(bind ? "bind " : "connect ") + endpoint);
}

std::string last_endpoint(void* sock, const std::string& fallback) {
  std::array<char, 256> buf{};
  size_t len = buf.size();
  if (Z.zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, buf.data(), &len) != 0 || len == 0) {
    return fallback;
  }
  return std::string(buf.data());
}

bool send_frames(void* sock, std::initializer_list<std::string_view> frames) {
  size_t i = 0;
  for (std::string_view f : frames) {
    const int flags = ++i < frames.size() ? ZMQ_SNDMORE : 0;
    if (Z.zmq_send(sock, f.data(), f.size(), flags) < 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

KvEventPublisher::KvEventPublisher(KvEventsConfig config)
    : config_(std::move(config)), log_(log::get("sim.kv_events")) {}

Result<std::unique_ptr<KvEventPublisher>, std::string> KvEventPublisher::start(KvEventsConfig config) {
  if (auto e = load_zmq(); !e.empty()) {
    return make_error(std::string("kv events"), e);
  }
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher(std::move(config)));
  p->ctx_ = Z.zmq_ctx_new();
  if (p->ctx_ == nullptr) {
    return make_error(std::string("kv events"), zmq_err("zmq_ctx_new"));
  }
  p->pub_ = Z.zmq_socket(p->ctx_, ZMQ_PUB);
  const int linger = 0;
  Z.zmq_setsockopt(p->pub_, ZMQ_LINGER, &linger, sizeof(linger));
  Z.zmq_setsockopt(p->pub_, ZMQ_SNDHWM, &p->config_.hwm, sizeof(p->config_.hwm));
  const bool bind = kv_endpoint_binds(p->config_.endpoint);
  if (auto e = attach(p->pub_, p->config_.endpoint, bind); !e.empty()) {
    return make_error(std::string("kv events"), e);
  }
  p->endpoint_ = bind ? last_endpoint(p->pub_, p->config_.endpoint) : p->config_.endpoint;
  if (!p->config_.replay_endpoint.empty()) {
    p->router_ = Z.zmq_socket(p->ctx_, ZMQ_ROUTER);
    Z.zmq_setsockopt(p->router_, ZMQ_LINGER, &linger, sizeof(linger));
    if (auto e = attach(p->router_, p->config_.replay_endpoint, true); !e.empty()) {
      return make_error(std::string("kv events"), e);
    }
    p->replay_endpoint_ = last_endpoint(p->router_, p->config_.replay_endpoint);
  }
  p->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->wake_fd_ < 0) {
    return make_error(std::string("kv events"), std::string("eventfd: ") + std::strerror(errno));
  }
  CGN_LOG_INFO(p->log_, "publishing KV events", log::kv("endpoint", p->endpoint_),
               log::kv("mode", bind ? "bind" : "connect"), log::kv("topic", p->config_.topic),
               log::kv("replay", p->replay_endpoint_.empty() ? "off" : p->replay_endpoint_),
               log::kv("encoding", p->config_.encoding == KvEventEncoding::kMap ? "map" : "array"));
  KvEventPublisher* raw = p.get();
  p->thread_ = std::thread([raw] { raw->run(); });
  return p;
}

KvEventPublisher::~KvEventPublisher() {
  stop();
  if (pub_ != nullptr) {
    Z.zmq_close(pub_);
  }
  if (router_ != nullptr) {
    Z.zmq_close(router_);
  }
  if (ctx_ != nullptr) {
    Z.zmq_ctx_term(ctx_);
  }
  if (wake_fd_ >= 0) {
    ::close(wake_fd_);
  }
}

void KvEventPublisher::publish(std::vector<KvCacheEvent> events, double ts) {
  if (events.empty()) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return;
    }
    const int64_t seq = next_seq_++;
    if (queue_.size() >= kMaxQueuedBatches) {
      queue_.pop_front();
      ++stats_.batches_dropped;
    }
    queue_.push_back(Pending{seq, ts, std::move(events)});
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void KvEventPublisher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

KvPublisherStats KvEventPublisher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void KvEventPublisher::run() {
  std::array<zmq_pollitem_t, 2> items{};
  items[0].fd = wake_fd_;
  items[0].events = ZMQ_POLLIN;
  items[1].socket = router_;
  items[1].events = ZMQ_POLLIN;
  const int n = router_ != nullptr ? 2 : 1;
  while (true) {
    if (Z.zmq_poll(items.data(), n, -1) < 0) {
      if (Z.zmq_errno() == EINTR) {
        continue;
      }
      CGN_LOG_ERROR(log_, "zmq_poll failed; KV events stop", log::kv("error", Z.zmq_strerror(Z.zmq_errno())));
      return;
    }
    if ((items[0].revents & ZMQ_POLLIN) != 0) {
      uint64_t v = 0;
      (void)!::read(wake_fd_, &v, sizeof(v));
    }
    send_queued();
    if (n == 2 && (items[1].revents & ZMQ_POLLIN) != 0) {
      answer_replay();
    }
    std::lock_guard lock(mu_);
    if (stopping_) {
      return;
    }
  }
}

void KvEventPublisher::send_queued() {
  std::deque<Pending> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(queue_);
  }
  uint64_t sent = 0;
  uint64_t events = 0;
  for (Pending& p : batch) {
    std::string payload = encode_event_batch(p.ts, p.events, config_.encoding);
    const std::string seq = encode_seq(p.seq);
    if (!send_frames(pub_, {config_.topic, seq, payload})) {
      CGN_LOG_WARN(log_, "KV event batch not sent", log::kv("seq", p.seq),
                   log::kv("error", Z.zmq_strerror(Z.zmq_errno())));
    } else {
      ++sent;
      events += p.events.size();
    }
    if (config_.buffer_steps > 0) {
      replay_.emplace_back(p.seq, std::move(payload));
      while (replay_.size() > config_.buffer_steps) {
        replay_.pop_front();
      }
    }
  }
  if (!batch.empty()) {
    std::lock_guard lock(mu_);
    stats_.batches_sent += sent;
    stats_.events_sent += events;
  }
}

void KvEventPublisher::answer_replay() {
  // Drain every pending request: [identity, "", start_seq (8 bytes big-endian)].
  while (true) {
    std::vector<std::string> frames;
    int more = 1;
    while (more != 0 && frames.size() < 8) {
      zmq_msg_t m;
      Z.zmq_msg_init(&m);
      if (Z.zmq_msg_recv(&m, router_, frames.empty() ? ZMQ_DONTWAIT : 0) < 0) {
        Z.zmq_msg_close(&m);
        return;
      }
      frames.emplace_back(static_cast<const char*>(Z.zmq_msg_data(&m)), Z.zmq_msg_size(&m));
      more = Z.zmq_msg_more(&m);
      Z.zmq_msg_close(&m);
    }
    while (more != 0) {  // an over-long request: drop its remaining frames
      zmq_msg_t m;
      Z.zmq_msg_init(&m);
      const int rc = Z.zmq_msg_recv(&m, router_, 0);
      more = rc < 0 ? 0 : Z.zmq_msg_more(&m);
      Z.zmq_msg_close(&m);
      frames.emplace_back();
    }
    if (frames.size() != 3 || frames[2].size() != 8) {
      CGN_LOG_WARN(log_, "malformed replay request ignored", log::kv("frames", frames.size()));
      continue;
    }
    uint64_t start = 0;
    for (char c : frames[2]) {
      start = (start << 8) | static_cast<uint8_t>(c);
    }
    const auto from = static_cast<int64_t>(start);
    for (const auto& [seq, payload] : replay_) {
      if (seq >= from) {
        (void)send_frames(router_, {frames[0], "", encode_seq(seq), payload});
      }
    }
    (void)send_frames(router_, {frames[0], "", encode_seq(-1), ""});
    std::lock_guard lock(mu_);
    ++stats_.replays;
  }
}

}  // namespace cgn::sim
