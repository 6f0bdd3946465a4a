#include "state/etcd/etcd_store.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

#include "cluster/kv_publish_set.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/keys.h"
#include "state/etcd/prefix_mirror.h"

namespace cgn::state {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

// The part of a record's address the router dials: "host:port" or a full URL.
Result<cluster::NodeEndpoint, cluster::StateError> endpoint_of(const std::string& address) {
  if (address.starts_with("http://") || address.starts_with("https://")) {
    return cluster::parse_node_url(address);
  }
  return cluster::parse_node_url("http://" + address);
}

}  // namespace

Result<config::RouterConfig, cluster::StateError> parse_policy_value(std::string_view text,
                                                                     const std::string& origin) {
  auto cfg = config::load_config_from_string(text, origin);
  if (!cfg) {
    return make_error(cluster::StateError::kConfig, cfg.error().message);
  }
  return std::move(cfg->router);
}

bool cordon_value(std::string_view value) {
  std::string v(trim(value));
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return !(v == "false" || v == "0" || v == "no" || v == "off");
}

EtcdStateView::EtcdStateView(std::string root, config::RouterConfig base, cluster::NodeSink sink)
    : root_(std::move(root)),
      base_(std::move(base)),
      sink_(std::move(sink)),
      log_(log::get("state")),
      changes_(log_) {
  while (root_.size() > 1 && root_.back() == '/') {
    root_.pop_back();
  }
  root_ += '/';
}

size_t EtcdStateView::prefixes(std::string_view node) const {
  auto it = kv_.find(node);
  return it == kv_.end() ? 0 : it->second.size();
}

bool EtcdStateView::cordoned(std::string_view node) const {
  auto it = cordon_.find(node);
  return it != cordon_.end() && it->second;
}

bool EtcdStateView::is_cordoned(const std::string& id) const {
  auto it = nodes_.find(id);
  return cordoned(id) || (it != nodes_.end() && it->second.record.cordon);
}

void EtcdStateView::reject(std::string_view key, std::string_view why) {
  ++rejected_;
  CGN_LOG_WARN(log_, "etcd value ignored; keeping the last good one", log::kv("key", key),
               log::kv("error", why));
}

bool EtcdStateView::current(const Held& h, const Node& n, int64_t since_revision) {
  return h.epoch ? *h.epoch == n.record.kv_epoch : h.mod_revision > since_revision;
}

void EtcdStateView::emit_upsert(const std::string& id, const Node& n) {
  cluster::NodeEvent ev;
  ev.kind = cluster::NodeEvent::Kind::kUpsert;
  ev.id = id;
  ev.endpoint = n.endpoint;
  ev.update = cluster::to_node_update(n.record);
  ev.update.cordoned = is_cordoned(id);
  // Alive while its record is: the record sits on the agent's lease, whose keep-alives make no
  // watch event, and the lease's expiry deletes it (kRemove). Its age says nothing.
  ev.update.liveness = routing::Liveness::kMembership;
  ev.source = routing::UpdateSource::kEtcd;
  sink_(ev);
}

void EtcdStateView::put(std::string_view key, std::string_view value, int64_t mod_revision) {
  if (!key.starts_with(root_)) {
    return;
  }
  const std::string_view rel = key.substr(root_.size());
  if (rel == "policy") {
    const std::string origin = std::string(key) + " (etcd revision " + std::to_string(mod_revision) + ")";
    auto cfg = parse_policy_value(value, origin);
    if (!cfg) {
      reject(key, cfg.error().message);
      return;
    }
    cluster::NodeEvent ev;
    ev.kind = cluster::NodeEvent::Kind::kPolicy;
    ev.policy = std::make_shared<const config::RouterConfig>(std::move(*cfg));
    ev.policy_origin = origin;
    sink_(ev);
    return;
  }
  if (auto id = etcd::keys::node_of(key, root_ + "nodes/")) {
    auto rec = cluster::parse_node_record(value);
    if (!rec) {
      reject(key, rec.error().message);
      return;
    }
    if (rec->node_id != *id) {
      reject(key, "record's node_id \"" + rec->node_id + "\" differs from the key's");
      return;
    }
    auto ep = endpoint_of(rec->address);
    if (!ep) {
      reject(key, ep.error().message);
      return;
    }
    auto it = nodes_.find(*id);
    const bool is_new = it == nodes_.end();
    const bool epoch_changed = !is_new && it->second.record.kv_epoch != rec->kv_epoch;
    Node& n = nodes_[*id];
    n.record = std::move(*rec);
    n.endpoint = std::move(*ep);
    n.endpoint.agent = true;  // records in etcd are published by agents
    n.mod_revision = mod_revision;
    emit_upsert(*id, n);
    // A new node: every digest already mirrored for it. A new epoch: the core dropped the node's
    // entries; digests written after this record belong to the new epoch.
    if (is_new || epoch_changed) {
      reconfirm(*id, n, is_new ? 0 : mod_revision);
      if (epoch_changed) {
        CGN_LOG_INFO(log_, "node kv_epoch changed; its prefixes were dropped", log::kv("node", *id),
                     log::kv("kv_epoch", n.record.kv_epoch));
      }
    }
    return;
  }
  if (auto id = etcd::keys::node_of(key, root_ + "cordon/")) {
    const bool before = is_cordoned(*id);
    cordon_[*id] = cordon_value(value);
    cordon_changed(*id, before);
    return;
  }
  if (rel.starts_with("kv/")) {
    put_kv(key, rel.substr(3), value, mod_revision);
  }
}

void EtcdStateView::reconfirm(const std::string& id, const Node& n, int64_t since_revision) {
  // One event per tier, engine first.
  std::array<cluster::NodeEvent, 3> by_tier;
  for (size_t t = 0; t < by_tier.size(); ++t) {
    by_tier[t].kind = cluster::NodeEvent::Kind::kPrefixes;
    by_tier[t].id = id;
    by_tier[t].source = routing::UpdateSource::kEtcd;
    by_tier[t].tier = static_cast<routing::Tier>(t);
  }
  if (auto kv = kv_.find(id); kv != kv_.end()) {
    for (auto& [d, held] : kv->second) {
      held.confirmed = current(held, n, since_revision);
      if (held.confirmed) {
        by_tier[static_cast<size_t>(held.tier)].confirmed.push_back(d);
      }
    }
  }
  for (const auto& pe : by_tier) {
    if (!pe.confirmed.empty()) {
      sink_(pe);
    }
  }
}

void EtcdStateView::put_kv(std::string_view key, std::string_view rel_kv, std::string_view value,
                           int64_t mod_revision) {
  auto parsed = etcd::keys::parse_kv_key(std::string(etcd::keys::kKvPrefix) + std::string(rel_kv));
  if (!parsed) {
    reject(key, "not a /kv/<node>/<64 hex digits> key");
    return;
  }
  auto v = cluster::parse_kv_prefix_value(value);
  if (!v) {
    reject(key, v.error().message);
    return;
  }
  Held h;
  h.mod_revision = mod_revision;
  h.epoch = v->epoch;
  h.tier = v->tier;
  auto& slot = kv_[parsed->first][parsed->second];
  const bool was = slot.confirmed;
  const routing::Tier was_tier = slot.tier;
  auto node = nodes_.find(parsed->first);
  // Written now, so after the node's record: only an epoch naming another epoch keeps it out.
  h.confirmed = node != nodes_.end() && current(h, node->second, 0);
  slot = h;
  const bool now = h.confirmed;
  // A tier change of a confirmed digest (engine evicted it to RAM, RAM spilled it to SSD) is a
  // confirm at the new tier: the index replaces the entry's tier.
  if (was != now || (now && was_tier != h.tier)) {
    cluster::NodeEvent ev;
    ev.kind = cluster::NodeEvent::Kind::kPrefixes;
    ev.id = parsed->first;
    ev.source = routing::UpdateSource::kEtcd;
    ev.tier = h.tier;
    (now ? ev.confirmed : ev.removed).push_back(parsed->second);
    sink_(ev);
  }
}

void EtcdStateView::cordon_changed(const std::string& id, bool before) {
  const bool after = is_cordoned(id);
  changes_.update("cordon/" + id, after ? "cordoned" : "uncordoned", spdlog::level::info,
                  after ? "node cordoned: no new traffic" : "node uncordoned", log::kv("node", id));
  if (before != after) {
    if (auto it = nodes_.find(id); it != nodes_.end()) {
      emit_upsert(id, it->second);
    }
  }
}

void EtcdStateView::del(std::string_view key, int64_t revision) {
  if (!key.starts_with(root_)) {
    return;
  }
  const std::string_view rel = key.substr(root_.size());
  if (rel == "policy") {
    cluster::NodeEvent ev;
    ev.kind = cluster::NodeEvent::Kind::kPolicy;
    ev.policy = std::make_shared<const config::RouterConfig>(base_);
    ev.policy_origin = std::string(key) + " deleted (etcd revision " + std::to_string(revision) +
                       "): the router's own configuration";
    sink_(ev);
    return;
  }
  if (auto id = etcd::keys::node_of(key, root_ + "nodes/")) {
    if (nodes_.erase(*id) > 0) {
      // The core drops everything it holds for the node.
      if (auto kv = kv_.find(*id); kv != kv_.end()) {
        for (auto& [d, held] : kv->second) {
          held.confirmed = false;
        }
      }
      cluster::NodeEvent ev;
      ev.kind = cluster::NodeEvent::Kind::kRemove;
      ev.id = *id;
      ev.source = routing::UpdateSource::kEtcd;
      sink_(ev);
    }
    return;
  }
  if (auto id = etcd::keys::node_of(key, root_ + "cordon/")) {
    const bool before = is_cordoned(*id);
    cordon_.erase(*id);
    cordon_changed(*id, before);
    return;
  }
  if (rel.starts_with("kv/")) {
    auto parsed = etcd::keys::parse_kv_key(std::string(etcd::keys::kKvPrefix) + std::string(rel.substr(3)));
    if (!parsed) {
      return;
    }
    auto it = kv_.find(parsed->first);
    if (it == kv_.end()) {
      return;
    }
    auto held = it->second.find(parsed->second);
    if (held == it->second.end()) {
      return;
    }
    const bool was = held->second.confirmed;
    it->second.erase(held);
    if (it->second.empty()) {
      kv_.erase(it);
    }
    if (was && nodes_.contains(parsed->first)) {
      cluster::NodeEvent ev;
      ev.kind = cluster::NodeEvent::Kind::kPrefixes;
      ev.id = parsed->first;
      ev.source = routing::UpdateSource::kEtcd;
      ev.removed.push_back(parsed->second);
      sink_(ev);
    }
  }
}

// ---------------------------------------------------------------------------------------------

EtcdStore::EtcdStore(EtcdStoreOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<EtcdStore>, cluster::StateError> EtcdStore::create(EtcdStoreOptions options) {
  if (options.endpoints.empty()) {
    return make_error(cluster::StateError::kConfig,
                      "state_backend \"etcd\" needs at least one endpoint ([state.etcd] endpoints)");
  }
  if (!options.root.starts_with('/')) {
    return make_error(cluster::StateError::kConfig,
                      "[state.etcd] prefix must start with '/', got \"" + options.root + "\"");
  }
  std::unique_ptr<EtcdStore> store(new EtcdStore(std::move(options)));
  etcd::EtcdClientOptions co = store->options_.client;
  co.endpoints = store->options_.endpoints;
  EtcdStore* self = store.get();
  co.on_reachability_change = [self](bool reachable) {
    self->connected_.store(reachable, std::memory_order_relaxed);
    std::lock_guard lock(self->sink_mu_);
    if (self->stopping_.load() || !self->sink_) {
      return;
    }
    cluster::NodeEvent ev;
    ev.kind = cluster::NodeEvent::Kind::kBackend;
    ev.connected = reachable;
    self->sink_(ev);
  };
  auto client = etcd::EtcdClient::create(std::move(co));
  if (!client) {
    return make_error(cluster::StateError::kConfig, "etcd: " + client.error().message);
  }
  store->client_ = std::move(*client);
  return store;
}

EtcdStore::~EtcdStore() {
  stop();
  client_.reset();
}

Status<cluster::StateError> EtcdStore::start(cluster::NodeSink sink) {
  if (started_) {
    return make_error(cluster::StateError::kStart, "etcd store already started");
  }
  started_ = true;
  {
    std::lock_guard lock(sink_mu_);
    sink_ = std::move(sink);
    view_ = std::make_unique<EtcdStateView>(options_.root, options_.base, sink_);
  }
  std::string root = options_.root;
  while (root.size() > 1 && root.back() == '/') {
    root.pop_back();
  }
  etcd::MirrorCallbacks cb;
  cb.on_put = [this](const etcd::KeyValue& kv) {
    std::lock_guard lock(sink_mu_);
    if (!stopping_.load()) {
      view_->put(kv.key, kv.value, kv.mod_revision);
    }
  };
  cb.on_delete = [this](const std::string& key, int64_t revision) {
    std::lock_guard lock(sink_mu_);
    if (!stopping_.load()) {
      view_->del(key, revision);
    }
  };
  auto log = log::get("state");
  cb.on_reset = [log](int64_t revision) {
    CGN_LOG_INFO(log, "etcd state loaded", log::kv("revision", revision));
  };
  {
    // The connection state as known now (metrics start with a value); changes follow.
    std::lock_guard lock(sink_mu_);
    cluster::NodeEvent ev;
    ev.kind = cluster::NodeEvent::Kind::kBackend;
    ev.connected = client_->reachable();
    sink_(ev);
  }
  mirror_ = std::make_unique<etcd::PrefixMirror>(client_, root + "/", std::move(cb));
  CGN_LOG_INFO(log, "watching etcd", log::kv("prefix", root + "/"),
               log::kv("endpoints", fmt::format("{}", fmt::join(options_.endpoints, ","))));
  return Ok{};
}

void EtcdStore::stop() {
  {
    std::lock_guard lock(sink_mu_);
    stopping_.store(true);
  }
  if (mirror_) {
    mirror_->stop();
    mirror_.reset();
  }
}

bool EtcdStore::synced() const {
  return mirror_ && mirror_->synced();
}

}  // namespace cgn::state
