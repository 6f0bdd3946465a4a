// A watch on a key range over etcd's Watch bidi stream, on its own thread,
// that survives stream breaks: it reconnects with backoff (to the next
// endpoint when there are several) and resumes from the revision after the
// last one it delivered, so the callback sees every change exactly once and
// in order. When that revision has been compacted away it delivers one
// kResyncNeeded update and stops; the caller re-reads the range and starts a
// new watcher from the read's revision + 1 (PrefixMirror does exactly this).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/etcd_types.h"

namespace grpc {
class ClientContext;
}

namespace cgn::etcd {

using WatchCallback = std::function<void(const WatchUpdate&)>;

// Where a watch resumes after a reconnect, and which events it has already
// delivered. Pure and single-threaded (the Watcher's thread owns one).
class WatchCursor {
 public:
  // start_revision 0 = "now": pinned by the first created response.
  explicit WatchCursor(int64_t start_revision) : next_(start_revision > 0 ? start_revision : 0) {}

  // The start_revision for the next create request (0 while still "now").
  int64_t next_revision() const { return next_; }
  // The server confirmed the watch at store revision `header_revision`.
  void on_created(int64_t header_revision);
  // A progress notification: nothing up to `header_revision` is pending.
  void on_progress(int64_t header_revision);
  // Drops events already delivered (mod_revision < next_revision) and moves
  // past the rest; returns what to deliver, in order.
  std::vector<WatchEvent> accept(std::vector<WatchEvent> events);

 private:
  int64_t next_;
};

struct WatchOptions {
  std::string key;
  // "" = just `key`; prefix_range_end(key) = the prefix `key`.
  std::string range_end;
  // First revision to deliver (inclusive). 0 = changes after the watch is
  // first established ("now"); later reconnects resume from where it was.
  int64_t start_revision = 0;
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{2000};
};

// Owns its thread and stream. The callback runs on that thread, one update at
// a time, and must not destroy the Watcher (stop() joins the thread). Every
// method is safe from any other thread. Destruction stops it.
class Watcher {
 public:
  Watcher(std::shared_ptr<EtcdClient> client, WatchOptions options, WatchCallback callback);
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Watch every key under `prefix` from `start_revision`.
  static std::unique_ptr<Watcher> prefix(std::shared_ptr<EtcdClient> client, const std::string& prefix,
                                         int64_t start_revision, WatchCallback callback);

  // Cancels the stream and joins the thread. Idempotent.
  void stop();

  // The revision the next (re)connection asks for; 0 while still "now".
  int64_t next_revision() const { return next_revision_.load(std::memory_order_acquire); }
  // A stream is open and the server confirmed the watch.
  bool connected() const { return connected_.load(std::memory_order_acquire); }
  // Streams opened after the first one.
  uint64_t reconnects() const { return reconnects_.load(std::memory_order_acquire); }
  // Stopped for good: stop() was called or the server reported compaction.
  bool finished() const { return finished_.load(std::memory_order_acquire); }

 private:
  void run();
  // One stream's life; returns true when the watcher must not reconnect.
  bool run_stream(size_t endpoint);
  bool wait_backoff(std::chrono::milliseconds d);

  std::shared_ptr<EtcdClient> client_;
  WatchOptions options_;
  WatchCallback callback_;
  log::Logger log_;
  WatchCursor cursor_;  // the watcher thread's; next_revision_ mirrors it for readers

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                     // guarded by mu_
  std::shared_ptr<grpc::ClientContext> ctx_;  // guarded by mu_: the open stream's, for TryCancel

  std::atomic<int64_t> next_revision_{0};
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> reconnects_{0};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace cgn::etcd
