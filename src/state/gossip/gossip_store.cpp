#include "state/gossip/gossip_store.h"

#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "cluster/node_record.h"
#include "core/log.h"

namespace cgn::gossip {

namespace {

uint64_t unix_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

bool wildcard(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

constexpr const char* kLoadFields[] = {"free_blocks",   "queue_depth", "running", "power_watts",
                                       "energy_joules", "kv_epoch",    "ready",   "total_blocks"};

}  // namespace

std::pair<std::string, std::string> split_record(const std::string& json) {
  auto doc = nlohmann::json::parse(json, nullptr, false);
  if (!doc.is_object()) {
    return {json, ""};
  }
  nlohmann::json load = nlohmann::json::object();
  for (const char* f : kLoadFields) {
    if (auto it = doc.find(f); it != doc.end()) {
      load[f] = *it;
      doc.erase(it);
    }
  }
  return {doc.dump(), load.dump()};
}

std::string merge_record(const std::string& identity, const std::string& load) {
  if (load.empty()) {
    return identity;
  }
  auto doc = nlohmann::json::parse(identity, nullptr, false);
  auto extra = nlohmann::json::parse(load, nullptr, false);
  if (!doc.is_object() || !extra.is_object()) {
    return identity;
  }
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    doc[it.key()] = it.value();
  }
  return doc.dump();
}

Result<NodeOptions, NodeError> node_options_from_config(const config::GossipConfig& cfg, std::string name) {
  NodeOptions o;
  o.listen = cfg.listen;
  o.seeds = cfg.seeds;
  o.core.cluster_id = cfg.cluster_id;
  o.core.name = std::move(name);
  o.core.generation = unix_ns();
  o.core.hmac_key = cfg.secret.reveal();
  o.core.rotation_key = cfg.rotation_secret.reveal();
  if (o.core.hmac_key.empty() && !cfg.insecure) {
    return make_error(NodeError::kConfig,
                      "[state.gossip] secret_env is not set: gossip without a key lets anyone who reaches "
                      "the UDP port join the cluster and receive requests; set secret_env to the name of "
                      "an environment variable holding the cluster key, or insecure = true to run "
                      "without one");
  }
  if (o.core.hmac_key.empty()) {
    CGN_LOG_WARN(log::get("state.gossip"),
                 "INSECURE: [state.gossip] insecure = true; gossip packets are not signed and anyone "
                 "who reaches the UDP port can join the cluster and receive requests",
                 log::kv("listen", cfg.listen));
  }
  if (o.core.name.size() > kMaxName) {
    return make_error(NodeError::kConfig,
                      "gossip member name \"" + o.core.name + "\" is longer than 64 bytes");
  }
  return o;
}

std::vector<std::string> etcd_only_features(const config::CognitoraConfig& cfg) {
  std::vector<std::string> out;
  const config::AgentConfig agent_defaults;
  if (cfg.agent.max_published_prefixes != agent_defaults.max_published_prefixes ||
      cfg.agent.publish_interval_ms != agent_defaults.publish_interval_ms) {
    out.emplace_back(
        "live KV prefixes ([agent] max_published_prefixes, publish_interval_ms) need state_backend = "
        "\"etcd\"; "
        "gossip carries node records only, so the router routes on its own optimistic index");
  }
  const config::EtcdConfig etcd_defaults;
  if (cfg.state.etcd.endpoints != etcd_defaults.endpoints || cfg.state.etcd.prefix != etcd_defaults.prefix) {
    out.emplace_back(
        "cordon flags and routing-policy hot reload ([state.etcd] endpoints, prefix) need state_backend = "
        "\"etcd\"; with gossip, cordon is not available and the policy reloads on SIGHUP only");
  }
  return out;
}

std::vector<cluster::NodeEvent> reconcile(const std::vector<MemberView>& members,
                                          std::map<std::string, std::string>& known) {
  auto log = log::get("state.gossip");
  std::vector<cluster::NodeEvent> events;
  std::map<std::string, bool> present;
  for (const auto& m : members) {
    if (m.self || !m.live) {
      continue;
    }
    auto rec = m.kvs.find(kRecordKey);
    if (rec == m.kvs.end()) {
      continue;  // a member without a record (a router) is not a node
    }
    auto load = m.kvs.find(kLoadKey);
    const std::string json = merge_record(rec->second, load == m.kvs.end() ? std::string() : load->second);
    auto parsed = cluster::parse_node_record(json);
    if (!parsed) {
      CGN_LOG_WARN(log, "gossip member has an unreadable node record", log::kv("member", m.name),
                   log::kv("error", parsed.error().message));
      continue;
    }
    if (parsed->node_id != m.name) {
      CGN_LOG_WARN(log, "gossip record names another node; ignored", log::kv("member", m.name),
                   log::kv("node_id", parsed->node_id));
      continue;
    }
    present[m.name] = true;
    auto it = known.find(m.name);
    if (it != known.end() && it->second == json) {
      continue;
    }
    cluster::NodeEvent ev;
    ev.kind = cluster::NodeEvent::Kind::kUpsert;
    ev.id = m.name;
    ev.source = routing::UpdateSource::kGossip;
    ev.update = cluster::to_node_update(*parsed);
    // Alive while the failure detector says so: an unchanged record is not a silent node.
    ev.update.liveness = routing::Liveness::kMembership;
    // The record's address; a wildcard host ("0.0.0.0:9090") means "where my packets come from".
    std::string host;
    uint16_t port = 0;
    if (auto hp = split_host_port(parsed->address)) {
      host = hp->first;
      port = hp->second;
    }
    if (wildcard(host) && m.addr.known()) {
      host = m.addr.host();
    }
    ev.endpoint.host = host;
    ev.endpoint.port = port;
    ev.endpoint.agent = true;  // records in gossip are published by agents
    ev.update.address =
        (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
    known[m.name] = json;
    events.push_back(std::move(ev));
  }
  for (auto it = known.begin(); it != known.end();) {
    if (present.contains(it->first)) {
      ++it;
      continue;
    }
    cluster::NodeEvent ev;
    ev.kind = cluster::NodeEvent::Kind::kRemove;
    ev.id = it->first;
    ev.source = routing::UpdateSource::kGossip;
    events.push_back(std::move(ev));
    it = known.erase(it);
  }
  return events;
}

GossipStore::GossipStore(GossipStoreOptions options, std::unique_ptr<GossipNode> node)
    : options_(std::move(options)), node_(std::move(node)) {}

Result<std::unique_ptr<GossipStore>, cluster::StateError> GossipStore::create(GossipStoreOptions options) {
  auto node = GossipNode::create(options.node);
  if (!node) {
    return make_error(cluster::StateError::kConfig, node.error().message);
  }
  return std::unique_ptr<GossipStore>(new GossipStore(std::move(options), std::move(*node)));
}

GossipStore::~GossipStore() {
  stop();
}

void GossipStore::attach_metrics(metrics::Registry& registry) {
  probe_ = std::make_unique<GossipProbe>(registry, *node_);
}

Status<cluster::StateError> GossipStore::start(cluster::NodeSink sink) {
  if (started_) {
    return Ok{};
  }
  auto port = node_->start();
  if (!port) {
    return make_error(cluster::StateError::kStart, port.error().message);
  }
  sink_ = std::move(sink);
  started_ = true;
  thread_ = std::thread([this] { loop(); });
  return Ok{};
}

void GossipStore::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    for (const auto& ev : reconcile(node_->members(), known_)) {
      sink_(ev);
    }
    lock.lock();
    cv_.wait_for(lock, options_.reconcile_interval, [this] { return stopping_; });
  }
}

void GossipStore::stop() {
  if (!started_) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  probe_.reset();
  node_->stop();
  started_ = false;
}

RecordPublisher::RecordPublisher(std::unique_ptr<GossipNode> node, std::function<std::string()> record_json,
                                 std::chrono::milliseconds interval)
    : node_(std::move(node)), record_json_(std::move(record_json)), interval_(interval) {}

RecordPublisher::~RecordPublisher() {
  stop();
}

void RecordPublisher::publish() {
  const auto [identity, load] = split_record(record_json_());
  // Identity first: a peer never sees load fields without the record they belong to.
  if (!node_->set(kRecordKey, identity) || (!load.empty() && !node_->set(kLoadKey, load))) {
    static auto log = log::get("state.gossip");
    CGN_LOG_WARN(log, "node record not published: over the gossip value limit",
                 log::kv("bytes", identity.size()), log::kv("limit", kMaxValue));
  }
}

Result<uint16_t, NodeError> RecordPublisher::start() {
  auto port = node_->start();
  if (!port) {
    return port;
  }
  publish();
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
      lock.unlock();
      publish();
      lock.lock();
    }
  });
  return port;
}

void RecordPublisher::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return;
    }
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  node_->stop();
}

namespace {

void warn_etcd_only(const config::CognitoraConfig& cfg, std::string_view who) {
  auto log = log::get("state.gossip");
  for (const auto& w : etcd_only_features(cfg)) {
    CGN_LOG_WARN(log, "etcd-only feature configured with state_backend = \"gossip\"", log::kv("binary", who),
                 log::kv("feature", w));
  }
  CGN_LOG_INFO(log,
               "gossip carries node records only; live KV prefixes, cordon flags and routing-policy hot "
               "reload need etcd",
               log::kv("binary", who));
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) {
    return "localhost";
  }
  return buf;
}

}  // namespace

Result<std::unique_ptr<GossipStore>, cluster::StateError> make_router_store(
    const config::CognitoraConfig& cfg) {
  warn_etcd_only(cfg, "cgn-router");
  std::string name = "router-" + host_name() + "-" + std::to_string(::getpid());
  if (name.size() > kMaxName) {
    name = "router-" + std::to_string(::getpid()) + "-" + std::to_string(unix_ns() % 1000000);
  }
  auto opts = node_options_from_config(cfg.state.gossip, name);
  if (!opts) {
    return make_error(cluster::StateError::kConfig, opts.error().message);
  }
  GossipStoreOptions so;
  so.node = std::move(*opts);
  return GossipStore::create(std::move(so));
}

Result<std::unique_ptr<RecordPublisher>, NodeError> start_agent_publisher(
    const config::CognitoraConfig& cfg, const std::string& node_id,
    std::function<std::string()> record_json) {
  warn_etcd_only(cfg, "cgn-agent");
  auto opts = node_options_from_config(cfg.state.gossip, node_id);
  if (!opts) {
    return make_error(NodeError::kConfig, opts.error().message);
  }
  auto node = GossipNode::create(std::move(*opts));
  if (!node) {
    return make_error(NodeError::kConfig, node.error().message);
  }
  auto pub = std::make_unique<RecordPublisher>(std::move(*node), std::move(record_json));
  auto port = pub->start();
  if (!port) {
    return make_error(NodeError::kStart, port.error().message);
  }
  return pub;
}

}  // namespace cgn::gossip
