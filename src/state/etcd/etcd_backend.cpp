#include "state/etcd/etcd_backend.h"

#include <chrono>
#include <memory>

#include "state/etcd/etcd_client.h"
#include "state/etcd/etcd_publisher.h"
#include "state/etcd/etcd_store.h"
#include "state/etcd/keys.h"

namespace cgn::state {

namespace {

Result<std::unique_ptr<cluster::StateStore>, cluster::StateError> make_store(const cluster::StoreParams& p) {
  const auto& cfg = p.config;
  if (!cfg.router.nodes.empty()) {
    return make_error(cluster::StateError::kConfig,
                      "state_backend \"etcd\" takes its nodes from etcd; remove the [[router.nodes]] "
                      "entries (or --node flags)");
  }
  EtcdStoreOptions o;
  o.client = etcd::client_options_from_config(cfg.state.etcd);
  o.endpoints = cfg.state.etcd.endpoints;
  o.root = cfg.state.etcd.prefix;
  o.base = cfg.router;  // the policy in force while /cognitora/policy is absent
  auto store = EtcdStore::create(std::move(o));
  if (!store) {
    return store.error();
  }
  return std::unique_ptr<cluster::StateStore>(std::move(*store));
}

// The agent's side: the record and live KV prefixes on one lease (etcd_publisher.h).
class EtcdNodePublisher final : public cluster::NodePublisher {
 public:
  explicit EtcdNodePublisher(std::unique_ptr<EtcdPublisher> publisher) : publisher_(std::move(publisher)) {}

  Status<cluster::StateError> start() override {
    publisher_->start();  // never waits for etcd: an outage at start is an outage
    return Ok{};
  }
  void stop() override { publisher_->stop(/*revoke=*/true); }  // leave at once, not after the TTL
  bool carries_prefixes() const override { return true; }
  void record_prefixes(std::span<const Digest> chain) override { publisher_->record_prefixes(chain); }
  void withdraw(const cluster::KvWithdrawal& w) override { publisher_->withdraw(w); }
  bool carries_tiers() const override { return true; }
  void record_residency(std::span<const std::pair<Digest, routing::Tier>> resident,
                        std::span<const Digest> gone) override {
    publisher_->record_residency(resident, gone);
  }
  cluster::WithdrawalStats withdrawal_stats() const override {
    const auto s = publisher_->stats();
    return {.clears = s.kv_event_clears,
            .withdrawals = s.kv_event_withdrawals,
            .withdrawn = s.kv_event_withdrawn};
  }
  void attach_metrics(metrics::Registry& reg) override;
  std::string describe() const override {
    return "state_backend \"etcd\": the record and live KV prefixes go to [state.etcd] endpoints";
  }
  std::string_view backend() const override { return "etcd"; }

 private:
  std::unique_ptr<EtcdPublisher> publisher_;
};

// The publisher's counters, refreshed at every scrape.
void EtcdNodePublisher::attach_metrics(metrics::Registry& reg) {
  auto published =
      reg.gauge("cgn_agent_published_prefixes", "Live KV prefix keys this agent holds in etcd.").with({});
  auto capacity = reg.gauge("cgn_agent_published_prefixes_capacity",
                            "Bound on live KV prefix keys (engine capacity in digest blocks, at most 4096).")
                      .with({});
  auto up = reg.gauge("cgn_agent_etcd_up", "1 when the last etcd write succeeded.").with({});
  auto txns = reg.counter("cgn_agent_etcd_txns_total", "Txns the publisher wrote to etcd.").with({});
  auto failed =
      reg.counter("cgn_agent_etcd_failed_txns_total", "Txns that failed (kept and retried).").with({});
  auto& key_family =
      reg.counter("cgn_agent_etcd_keys_written_total", "KV prefix keys written, by op.", {"op"});
  auto puts = key_family.with({"put"});
  auto dels = key_family.with({"delete"});
  auto reconciles = reg.counter("cgn_agent_etcd_reconciles_total", "Full re-syncs with etcd.").with({});
  auto last = std::make_shared<PublisherStats>();
  (void)reg.add_collect_callback([=, pub = publisher_.get()] {
    const auto s = pub->stats();
    published.set(static_cast<double>(s.published));
    capacity.set(static_cast<double>(s.capacity));
    up.set(s.connected ? 1.0 : 0.0);
    txns.inc(s.txns - last->txns);
    failed.inc(s.failed_txns - last->failed_txns);
    puts.inc(s.keys_put - last->keys_put);
    dels.inc(s.keys_deleted - last->keys_deleted);
    reconciles.inc(s.reconciles - last->reconciles);
    *last = s;
  });
}

Result<std::unique_ptr<cluster::NodePublisher>, cluster::StateError> make_publisher(
    const cluster::PublisherParams& p) {
  const auto& cfg = p.config;
  if (auto st = etcd::keys::check_node_id(p.node_id); !st) {
    return make_error(cluster::StateError::kConfig, "node id \"" + p.node_id + "\": " + st.error().message);
  }
  auto client = etcd::EtcdClient::create(etcd::client_options_from_config(cfg.state.etcd));
  if (!client) {
    return make_error(cluster::StateError::kConfig, "[state.etcd] endpoints: " + client.error().message);
  }
  PublisherOptions po;
  po.node_id = p.node_id;
  po.prefix = cfg.state.etcd.prefix;
  po.flush_interval = std::chrono::milliseconds(cfg.agent.publish_interval_ms);
  po.lease_ttl_s = cfg.state.etcd.lease_ttl_s;
  po.max_prefixes = cfg.agent.max_published_prefixes;
  po.block_bytes = cfg.router.routing.block_bytes;
  po.record_source = p.record;
  return std::unique_ptr<cluster::NodePublisher>(
      std::make_unique<EtcdNodePublisher>(std::make_unique<EtcdPublisher>(*client, std::move(po))));
}

}  // namespace

cluster::Backend etcd_backend() {
  return {.name = "etcd", .make_store = make_store, .make_publisher = make_publisher};
}

}  // namespace cgn::state
