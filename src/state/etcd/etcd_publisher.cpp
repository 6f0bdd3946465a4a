#include "state/etcd/etcd_publisher.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "state/etcd/keys.h"

namespace cgn::state {

namespace keys = etcd::keys;

namespace {

bool is_lease_gone(const etcd::EtcdError& e) {
  return e.code == etcd::EtcdErrc::kLeaseNotFound;
}

}  // namespace

EtcdPublisher::EtcdPublisher(std::shared_ptr<etcd::EtcdClient> client, PublisherOptions options)
    : client_(std::move(client)),
      options_(std::move(options)),
      log_(log::get("agent.publisher")),
      changes_(log_),
      set_(options_.max_prefixes) {
  stats_.capacity = options_.max_prefixes;
  root_ = options_.prefix;
  while (!root_.empty() && root_.back() == '/') {
    root_.pop_back();
  }
  root_ += '/';
}

std::string EtcdPublisher::node_key() const {
  return root_ + "nodes/" + options_.node_id;
}

std::string EtcdPublisher::kv_prefix() const {
  return root_ + "kv/" + options_.node_id + "/";
}

std::string EtcdPublisher::kv_key(const Digest& d) const {
  return kv_prefix() + to_hex(d);
}

EtcdPublisher::~EtcdPublisher() {
  stop(false);
}

void EtcdPublisher::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stopping_) {
    return;
  }
  thread_ = std::thread([this] { run(); });
}

void EtcdPublisher::stop(bool revoke) {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  if (lease_) {
    if (revoke) {
      if (auto st = lease_->revoke(); !st) {
        CGN_LOG_WARN(log_, "could not revoke the lease; the node's keys expire with it",
                     log::kv("error", st.error().message));
      } else {
        CGN_LOG_INFO(log_, "lease revoked; node record and KV prefixes removed",
                     log::kv("node", options_.node_id));
      }
    }
    lease_->stop();
    lease_.reset();
  }
}

void EtcdPublisher::record_prefixes(std::span<const Digest> chain) {
  if (chain.empty()) {
    return;
  }
  std::lock_guard lock(mu_);
  set_.touch(chain);
}

void EtcdPublisher::withdraw(const cluster::KvWithdrawal& w) {
  std::lock_guard lock(mu_);
  if (w.all) {
    set_.clear();  // the next flush deletes the node's whole KV prefix (one op)
    ++stats_.kv_event_clears;
  }
  if (w.removed_blocks > 0) {
    const uint32_t tokens = engine_block_tokens_ != 0 ? engine_block_tokens_ : w.block_size;
    const size_t n = cluster::digests_for_engine_blocks(w.removed_blocks, tokens, options_.block_bytes);
    stats_.kv_event_withdrawn += set_.prune_oldest(n);
    ++stats_.kv_event_withdrawals;
  }
}

void EtcdPublisher::record_residency(std::span<const std::pair<Digest, routing::Tier>> resident,
                                     std::span<const Digest> gone) {
  std::lock_guard lock(mu_);
  stats_.residency_changes += set_.set_residency(resident, gone);
}

std::string EtcdPublisher::put_value(const cluster::PrefixChanges& c, size_t i) const {
  const routing::Tier tier = i < c.put_tiers.size() ? c.put_tiers[i] : routing::Tier::kEngine;
  return cluster::kv_prefix_value(last_epoch_.value_or(0), tier);
}

PublisherStats EtcdPublisher::stats() const {
  std::lock_guard lock(mu_);
  PublisherStats s = stats_;
  s.published = set_.size();
  s.capacity = set_.capacity();
  return s;
}

void EtcdPublisher::run() {
  using clock = std::chrono::steady_clock;
  auto next = clock::now();
  while (true) {
    flush_once();
    next += options_.flush_interval;
    const auto now = clock::now();
    if (next < now) {
      next = now + options_.flush_interval;  // a slow flush delays the next; never a burst
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_until(lock, next, [&] { return stopping_; })) {
      return;
    }
  }
}

void EtcdPublisher::update_from_record(const cluster::NodeRecord& rec) {
  // Caller holds mu_.
  engine_block_tokens_ = rec.block_size;
  set_.set_capacity(cluster::publish_capacity(rec.total_blocks, rec.block_size, options_.block_bytes,
                                              options_.max_prefixes));
  if (last_epoch_.has_value() && rec.kv_epoch != *last_epoch_) {
    CGN_LOG_INFO(log_, "kv_epoch changed; dropping every published KV prefix", log::kv("from", *last_epoch_),
                 log::kv("to", rec.kv_epoch), log::kv("prefixes", set_.size()));
    set_.clear();
  }
  last_epoch_ = rec.kv_epoch;
  const auto now = std::chrono::steady_clock::now();
  if (cluster::under_kv_pressure(rec.total_blocks, rec.free_blocks, options_.pressure_threshold) &&
      set_.size() > 0 && now - last_prune_ >= options_.pressure_prune_interval) {
    const auto n =
        static_cast<size_t>(std::ceil(static_cast<double>(set_.size()) * options_.pressure_prune_fraction));
    set_.prune_oldest(std::max<size_t>(n, 1));
    last_prune_ = now;
    ++stats_.pressure_prunes;
  }
}

void EtcdPublisher::flush_once() {
  std::string record_json;
  if (options_.record_source) {
    cluster::NodeRecord rec = options_.record_source();
    record_json = to_json(rec);
    std::lock_guard lock(mu_);
    update_from_record(rec);
  }
  if (!ensure_lease()) {
    return;
  }
  {
    const auto age = lease_->since_last_ack();
    std::lock_guard lock(mu_);
    stats_.max_lease_ack_age = std::max(stats_.max_lease_ack_age, age);
  }
  if (!client_->reachable()) {
    // The lease stream (or another call) lost etcd: whatever we write next may meet a store
    // that lost or expired our keys, so reconcile; its read also tells when etcd is back.
    need_full_sync_ = true;
    std::lock_guard lock(mu_);
    if (stats_.connected) {
      stats_.connected = false;
      set_connected(false, "etcd unreachable");
    }
  }
  if (need_full_sync_) {
    need_full_sync_ = !full_sync(record_json);
  } else if (!incremental(record_json)) {
    need_full_sync_ = true;
  }
}

bool EtcdPublisher::ensure_lease() {
  if (!lease_) {
    etcd::LeaseKeeperOptions lo;
    lo.ttl_seconds = options_.lease_ttl_s;
    lo.on_lost = [this](int64_t id, const std::string& reason) {
      CGN_LOG_WARN(log_, "heartbeat lease lost; re-granting", log::kv("lease", id),
                   log::kv("reason", reason));
      lease_lost_.store(true);
    };
    auto keeper = etcd::LeaseKeeper::start(client_, std::move(lo));
    if (!keeper) {
      set_connected(false, keeper.error().message);
      std::lock_guard lock(mu_);
      stats_.connected = false;
      return false;
    }
    lease_ = std::move(*keeper);
    lease_lost_.store(false);
    need_full_sync_ = true;
    std::lock_guard lock(mu_);
    ++stats_.lease_grants;
    stats_.lease_id = lease_->lease_id();
  } else if (lease_lost_.exchange(false)) {
    auto id = lease_->regrant();
    if (!id) {
      lease_lost_.store(true);
      set_connected(false, id.error().message);
      std::lock_guard lock(mu_);
      stats_.connected = false;
      return false;
    }
    need_full_sync_ = true;
    std::lock_guard lock(mu_);
    ++stats_.lease_grants;
    stats_.lease_id = *id;
  }
  return lease_->lease_id() != 0;
}

bool EtcdPublisher::full_sync(const std::string& record_json) {
  auto existing = client_->get_prefix_paged(kv_prefix());
  if (!existing) {
    set_connected(false, existing.error().message);
    std::lock_guard lock(mu_);
    stats_.connected = false;
    return false;
  }
  const int64_t lease = lease_->lease_id();
  cluster::PrefixChanges changes;
  {
    std::lock_guard lock(mu_);
    set_.mark_unpublished();
    changes = set_.take_changes();
  }
  std::unordered_set<std::string> held;
  std::vector<etcd::TxnOp> ops;
  ops.reserve(changes.puts.size() + existing->kvs.size() + 1);
  if (!record_json.empty()) {
    ops.push_back(etcd::TxnOp::put(node_key(), record_json, lease));
  }
  for (size_t i = 0; i < changes.puts.size(); ++i) {
    std::string key = kv_key(changes.puts[i]);
    held.insert(key);
    ops.push_back(etcd::TxnOp::put(std::move(key), put_value(changes, i), lease));
  }
  size_t stale = 0;
  for (const auto& kv : existing->kvs) {
    if (!held.contains(kv.key)) {
      ops.push_back(etcd::TxnOp::del(kv.key));
      ++stale;
    }
  }
  auto res = client_->apply_batch(ops);
  if (!res) {
    std::lock_guard lock(mu_);
    batch_failed(res.error());  // need_full_sync_ stays set: the next flush marks all unpublished
    return false;
  }
  last_record_json_ = record_json;
  {
    std::lock_guard lock(mu_);
    ++stats_.flushes;
    stats_.txns += res->txns;
    stats_.keys_put += changes.puts.size();
    stats_.keys_deleted += stale;
    stats_.record_puts += record_json.empty() ? 0 : 1;
    ++stats_.reconciles;
    stats_.connected = true;
  }
  set_connected(true, "");
  CGN_LOG_INFO(log_, "published node record and KV prefixes", log::kv("node", options_.node_id),
               log::kv("lease", lease), log::kv("prefixes", changes.puts.size()),
               log::kv("stale_deleted", stale), log::kv("txns", res->txns));
  return true;
}

void EtcdPublisher::batch_failed(const etcd::EtcdError& e) {
  ++stats_.failed_txns;
  if (is_lease_gone(e)) {
    lease_lost_.store(true);
  }
  stats_.connected = is_lease_gone(e);
  set_connected(stats_.connected, e.message);
}

bool EtcdPublisher::incremental(const std::string& record_json) {
  const int64_t lease = lease_->lease_id();
  cluster::PrefixChanges changes;
  {
    std::lock_guard lock(mu_);
    changes = set_.take_changes();
    if (changes.clear_all && !changes.puts.empty()) {
      // The epoch change goes out alone with the record that carries the new epoch (one txn:
      // a put may not share a txn with a delete covering it); the new prefixes go next flush.
      cluster::PrefixChanges later;
      later.puts = std::move(changes.puts);
      set_.restore_changes(later);
      changes.puts.clear();
    }
  }
  std::vector<etcd::TxnOp> ops;
  ops.reserve(changes.ops() + 1);
  const bool record_changed = !record_json.empty() && record_json != last_record_json_;
  if (record_changed) {
    ops.push_back(etcd::TxnOp::put(node_key(), record_json, lease));
  }
  if (changes.clear_all) {
    ops.push_back(etcd::TxnOp::del(kv_prefix(), /*prefix=*/true));
  }
  for (const Digest& d : changes.deletes) {
    ops.push_back(etcd::TxnOp::del(kv_key(d)));
  }
  for (size_t i = 0; i < changes.puts.size(); ++i) {
    ops.push_back(etcd::TxnOp::put(kv_key(changes.puts[i]), put_value(changes, i), lease));
  }
  if (ops.empty()) {
    return true;
  }
  auto res = client_->apply_batch(ops);
  if (!res) {
    std::lock_guard lock(mu_);
    set_.restore_changes(changes);
    batch_failed(res.error());
    return false;
  }
  if (record_changed) {
    last_record_json_ = record_json;
  }
  std::lock_guard lock(mu_);
  ++stats_.flushes;
  stats_.txns += res->txns;
  stats_.keys_put += changes.puts.size();
  stats_.keys_deleted += changes.deletes.size();
  stats_.record_puts += record_changed ? 1 : 0;
  stats_.epoch_clears += changes.clear_all ? 1 : 0;
  stats_.connected = true;
  return true;
}

void EtcdPublisher::set_connected(bool ok, const std::string& why) {
  // Logs once per change (StateChangeLogger has its own lock; callers may hold mu_).
  if (ok) {
    changes_.update("etcd", "reachable", spdlog::level::info, "etcd reachable; publishing",
                    log::kv("node", options_.node_id));
  } else {
    changes_.update("etcd", "unreachable", spdlog::level::warn,
                    "etcd unreachable; serving on, will reconcile when it returns",
                    log::kv("node", options_.node_id), log::kv("error", why));
  }
}

}  // namespace cgn::state
