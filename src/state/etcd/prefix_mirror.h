// A local copy of every key under an etcd prefix, kept consistent through
// stream breaks, etcd restarts and compaction: range the prefix, watch from
// the range's revision + 1, and on "resync needed" range again and turn the
// difference into puts and deletes. Consumers see one ordered stream of
// on_put/on_delete calls that always leaves them equal to the prefix at some
// revision, plus on_reset after every (re)load.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/etcd_types.h"
#include "state/etcd/watcher.h"

namespace cgn::etcd {

struct MirrorCallbacks {
  // A key appeared or changed.
  std::function<void(const KeyValue& kv)> on_put;
  // A key vanished (deleted, or its lease expired); revision of the delete,
  // or of the re-read that found it gone.
  std::function<void(const std::string& key, int64_t revision)> on_delete;
  // A full re-read finished (first load, or after compaction); the puts and
  // deletes just before it already made the consumer equal to that read.
  std::function<void(int64_t revision)> on_reset;
};

// The map and its diffing, without threads or etcd (unit-tested alone).
// Not thread-safe; PrefixMirror serialises access.
class MirrorState {
 public:
  // Applies watch events in order; calls back for each change.
  void apply(const std::vector<WatchEvent>& events, const MirrorCallbacks& cb);
  // Replaces the map with a full read at `revision`: deletes for keys gone,
  // puts for keys new or changed (by mod_revision), then on_reset.
  void reset(const std::vector<KeyValue>& kvs, int64_t revision, const MirrorCallbacks& cb);

  const std::map<std::string, KeyValue>& map() const { return map_; }
  int64_t revision() const { return revision_; }

 private:
  std::map<std::string, KeyValue> map_;
  int64_t revision_ = 0;
};

struct PrefixMirrorOptions {
  // Keys per range page on (re)load.
  int64_t page_size = 1000;
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{2000};
};

// Owns a loader thread (range, then supervise the watcher) and, through its
// Watcher, the watch thread. Callbacks run on those threads, never two at a
// time, and must not destroy the mirror. The query methods are safe from any
// thread, including from inside a callback.
class PrefixMirror {
 public:
  PrefixMirror(std::shared_ptr<EtcdClient> client, std::string prefix, MirrorCallbacks callbacks,
               PrefixMirrorOptions options = {});
  ~PrefixMirror();
  PrefixMirror(const PrefixMirror&) = delete;
  PrefixMirror& operator=(const PrefixMirror&) = delete;

  void stop();

  // The first load has completed.
  bool synced() const { return synced_.load(std::memory_order_acquire); }
  // Re-reads caused by compaction so far.
  uint64_t resyncs() const { return resyncs_.load(std::memory_order_acquire); }
  // Revision the local copy reflects (at least).
  int64_t revision() const;
  std::map<std::string, KeyValue> snapshot() const;
  std::optional<KeyValue> get(const std::string& key) const;
  size_t size() const;

 private:
  void run();
  void on_watch(const WatchUpdate& up);

  std::shared_ptr<EtcdClient> client_;
  std::string prefix_;
  MirrorCallbacks callbacks_;
  PrefixMirrorOptions options_;
  log::Logger log_;

  // apply_mu_ serialises state changes with their callbacks; data_mu_ guards
  // reads of state_ so queries from callbacks do not deadlock.
  std::mutex apply_mu_;
  mutable std::mutex data_mu_;
  MirrorState state_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;          // guarded by mu_
  bool resync_requested_ = false;  // guarded by mu_

  std::atomic<bool> synced_{false};
  std::atomic<uint64_t> resyncs_{0};
  std::thread thread_;
};

}  // namespace cgn::etcd
