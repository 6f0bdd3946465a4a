#include "state/static/static_backend.h"

#include <algorithm>
#include <string>

#include "state/static/static_store.h"

namespace cgn::state {

namespace {

// Routers poll a static agent (Agent.Health); there is nothing to push.
class StaticPublisher final : public cluster::NodePublisher {
 public:
  Status<cluster::StateError> start() override { return Ok{}; }
  void stop() override {}
  bool carries_prefixes() const override { return false; }
  std::string describe() const override {
    return "state_backend \"static\": routers that list this agent in [[router.nodes]] poll it";
  }
  std::string_view backend() const override { return "static"; }
};

Result<std::unique_ptr<cluster::StateStore>, cluster::StateError> make_store(const cluster::StoreParams& p) {
  const auto& cfg = p.config;
  // A polled node's state is up to one poll period old between polls: a shorter bound would
  // take every node out of routing between two polls.
  const uint32_t stale_ms = cfg.router.routing.max_staleness_ms;
  if (stale_ms != 0 && std::chrono::milliseconds(stale_ms) <= p.poll_interval) {
    return make_error(cluster::StateError::kConfig,
                      "[router.routing] max_staleness_ms = " + std::to_string(stale_ms) +
                          " must exceed the poll period (" + std::to_string(p.poll_interval.count()) +
                          " ms: [router.timeouts] health_interval_ms or --poll-interval-ms), or be 0");
  }
  return make_static_store(cfg.router, p.poll_interval,
                           cluster::GrpcSecurity{auth::ClusterToken(cfg.cluster.tokens), cfg.tls});
}

}  // namespace

Result<std::unique_ptr<cluster::StateStore>, cluster::StateError> make_static_store(
    const config::RouterConfig& cfg, std::chrono::milliseconds interval, cluster::GrpcSecurity security) {
  StaticStoreOptions so;
  so.interval = interval;
  so.security = std::move(security);
  so.poll_timeout = std::min<std::chrono::milliseconds>(
      std::max<std::chrono::milliseconds>(interval, std::chrono::milliseconds(200)),
      std::chrono::milliseconds(cfg.timeouts.connect_ms + 1000));
  for (const auto& n : cfg.nodes) {
    StaticNodeSpec spec;
    spec.name = n.name;
    spec.url = n.url;
    spec.role = routing::parse_node_role(n.role).value_or(routing::NodeRole::kBoth);
    spec.models = n.models;
    spec.agent = n.agent;
    spec.engine = n.engine;
    so.nodes.push_back(std::move(spec));
  }
  auto store = StaticStore::create(std::move(so));
  if (!store) {
    return store.error();
  }
  return std::unique_ptr<cluster::StateStore>(std::move(*store));
}

cluster::Backend static_backend() {
  return {.name = "static",
          .make_store = make_store,
          .make_publisher = [](const cluster::PublisherParams&)
              -> Result<std::unique_ptr<cluster::NodePublisher>, cluster::StateError> {
            return std::unique_ptr<cluster::NodePublisher>(std::make_unique<StaticPublisher>());
          }};
}

}  // namespace cgn::state
