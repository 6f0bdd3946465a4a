#include "state/etcd/prefix_mirror.h"

#include <algorithm>
#include <utility>

namespace cgn::etcd {

void MirrorState::apply(const std::vector<WatchEvent>& events, const MirrorCallbacks& cb) {
  for (const auto& ev : events) {
    revision_ = std::max(revision_, ev.kv.mod_revision);
    if (ev.type == WatchEvent::Type::kPut) {
      map_[ev.kv.key] = ev.kv;
      if (cb.on_put) {
        cb.on_put(ev.kv);
      }
    } else if (map_.erase(ev.kv.key) > 0 && cb.on_delete) {
      cb.on_delete(ev.kv.key, ev.kv.mod_revision);
    }
  }
}

void MirrorState::reset(const std::vector<KeyValue>& kvs, int64_t revision, const MirrorCallbacks& cb) {
  std::map<std::string, KeyValue> fresh;
  for (const auto& kv : kvs) {
    fresh.emplace(kv.key, kv);
  }
  for (auto it = map_.begin(); it != map_.end();) {
    if (fresh.find(it->first) == fresh.end()) {
      std::string key = it->first;
      it = map_.erase(it);
      if (cb.on_delete) {
        cb.on_delete(key, revision);
      }
    } else {
      ++it;
    }
  }
  for (auto& [key, kv] : fresh) {
    auto it = map_.find(key);
    if (it == map_.end() || it->second.mod_revision != kv.mod_revision) {
      map_[key] = kv;
      if (cb.on_put) {
        cb.on_put(kv);
      }
    }
  }
  revision_ = revision;
  if (cb.on_reset) {
    cb.on_reset(revision);
  }
}

PrefixMirror::PrefixMirror(std::shared_ptr<EtcdClient> client, std::string prefix, MirrorCallbacks callbacks,
                           PrefixMirrorOptions options)
    : client_(std::move(client)),
      prefix_(std::move(prefix)),
      callbacks_(std::move(callbacks)),
      options_(options),
      log_(log::get("state.etcd")) {
  thread_ = std::thread([this] { run(); });
}

PrefixMirror::~PrefixMirror() {
  stop();
}

void PrefixMirror::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

int64_t PrefixMirror::revision() const {
  std::lock_guard<std::mutex> lock(data_mu_);
  return state_.revision();
}

std::map<std::string, KeyValue> PrefixMirror::snapshot() const {
  std::lock_guard<std::mutex> lock(data_mu_);
  return state_.map();
}

std::optional<KeyValue> PrefixMirror::get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(data_mu_);
  auto it = state_.map().find(key);
  if (it == state_.map().end()) {
    return std::nullopt;
  }
  return it->second;
}

size_t PrefixMirror::size() const {
  std::lock_guard<std::mutex> lock(data_mu_);
  return state_.map().size();
}

namespace {

// Changes recorded while data_mu_ is held and replayed to the consumer after
// it is released, so callbacks may query the mirror.
struct Recorded {
  struct Change {
    bool put = false;
    KeyValue kv;  // delete: key and revision in kv.key / kv.mod_revision
  };
  std::vector<Change> changes;
  int64_t reset_revision = -1;

  MirrorCallbacks recorder() {
    MirrorCallbacks cb;
    cb.on_put = [this](const KeyValue& kv) { changes.push_back({true, kv}); };
    cb.on_delete = [this](const std::string& key, int64_t rev) {
      KeyValue kv;
      kv.key = key;
      kv.mod_revision = rev;
      changes.push_back({false, std::move(kv)});
    };
    cb.on_reset = [this](int64_t rev) { reset_revision = rev; };
    return cb;
  }

  void replay(const MirrorCallbacks& cb) const {
    for (const auto& c : changes) {
      if (c.put && cb.on_put) {
        cb.on_put(c.kv);
      } else if (!c.put && cb.on_delete) {
        cb.on_delete(c.kv.key, c.kv.mod_revision);
      }
    }
    if (reset_revision >= 0 && cb.on_reset) {
      cb.on_reset(reset_revision);
    }
  }
};

}  // namespace

void PrefixMirror::on_watch(const WatchUpdate& up) {
  if (up.kind == WatchUpdate::Kind::kResyncNeeded) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      resync_requested_ = true;
    }
    cv_.notify_all();
    return;
  }
  std::lock_guard<std::mutex> apply(apply_mu_);
  Recorded rec;
  {
    std::lock_guard<std::mutex> lock(data_mu_);
    state_.apply(up.events, rec.recorder());
  }
  rec.replay(callbacks_);
}

void PrefixMirror::run() {
  auto backoff = options_.backoff_initial;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        return;
      }
      resync_requested_ = false;
    }
    auto read = client_->get_prefix_paged(prefix_, options_.page_size);
    if (!read) {
      CGN_LOG_DEBUG(log_, "etcd mirror load failed, retrying", log::kv("prefix", prefix_),
                    log::kv("error", read.error().message));
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, backoff, [this] { return stopping_; })) {
        return;
      }
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    backoff = options_.backoff_initial;
    {
      std::lock_guard<std::mutex> apply(apply_mu_);
      Recorded rec;
      {
        std::lock_guard<std::mutex> lock(data_mu_);
        state_.reset(read->kvs, read->revision, rec.recorder());
      }
      rec.replay(callbacks_);
    }
    synced_.store(true, std::memory_order_release);
    auto watcher = Watcher::prefix(client_, prefix_, read->revision + 1,
                                   [this](const WatchUpdate& up) { on_watch(up); });
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || resync_requested_; });
    }
    watcher.reset();  // joins its thread: no event can arrive after this
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return;
    }
    resyncs_.fetch_add(1, std::memory_order_acq_rel);
    CGN_LOG_INFO(log_, "etcd mirror re-reading after compaction", log::kv("prefix", prefix_));
  }
}

}  // namespace cgn::etcd
