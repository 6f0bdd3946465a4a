#include "state/gossip/gossip_backend.h"

#include "state/gossip/gossip_store.h"

namespace cgn::gossip {

namespace {

// The agent's member: gossips the record every second; live KV prefixes stay etcd-only.
class GossipPublisher final : public cluster::NodePublisher {
 public:
  GossipPublisher(const config::CognitoraConfig& cfg, std::string node_id,
                  std::function<cluster::NodeRecord()> record)
      : cfg_(cfg), node_id_(std::move(node_id)), record_(std::move(record)) {}

  Status<cluster::StateError> start() override {
    auto p = start_agent_publisher(cfg_, node_id_, [r = record_] { return cluster::to_json(r()); });
    if (!p) {
      return make_error(
          p.error().code == NodeError::kConfig ? cluster::StateError::kConfig : cluster::StateError::kStart,
          "[state.gossip]: " + p.error().message);
    }
    publisher_ = std::move(*p);
    return Ok{};
  }
  void stop() override {
    if (publisher_) {
      publisher_->stop();
    }
  }
  bool carries_prefixes() const override { return false; }
  std::string describe() const override {
    return "state_backend \"gossip\": the record goes to [state.gossip] members";
  }
  std::string_view backend() const override { return "gossip"; }

 private:
  const config::CognitoraConfig& cfg_;
  std::string node_id_;
  std::function<cluster::NodeRecord()> record_;
  std::unique_ptr<RecordPublisher> publisher_;
};

Result<std::unique_ptr<cluster::StateStore>, cluster::StateError> make_store(const cluster::StoreParams& p) {
  // Members are discovered over UDP ([state.gossip]); [[router.nodes]] are not used.
  if (!p.config.router.nodes.empty()) {
    return make_error(cluster::StateError::kConfig,
                      "state_backend \"gossip\" discovers its nodes by gossip; remove the [[router.nodes]] "
                      "entries (or --node flags)");
  }
  auto store = make_router_store(p.config);
  if (!store) {
    return store.error();
  }
  return std::unique_ptr<cluster::StateStore>(std::move(*store));
}

}  // namespace

cluster::Backend gossip_backend() {
  return {.name = "gossip",
          .make_store = make_store,
          .make_publisher = [](const cluster::PublisherParams& p)
              -> Result<std::unique_ptr<cluster::NodePublisher>, cluster::StateError> {
            return std::unique_ptr<cluster::NodePublisher>(
                std::make_unique<GossipPublisher>(p.config, p.node_id, p.record));
          }};
}

}  // namespace cgn::gossip
