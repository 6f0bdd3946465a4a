#include "router/state_backend.h"

#include "router/policy_config.h"
#include "router/router_log.h"
#include "state/backends.h"

namespace cgn::router {

Result<std::unique_ptr<cluster::StateStore>, GatewayError> make_state_store(
    const config::CognitoraConfig& cfg, std::chrono::milliseconds poll_interval) {
  auto backend = state::builtin_backends().find(cfg.router.state_backend);
  if (!backend) {
    return make_error(GatewayError::kConfig, backend.error().message);
  }
  auto store = (*backend)->make_store({.config = cfg, .poll_interval = poll_interval});
  if (!store) {
    return make_error(GatewayError::kConfig, store.error().message);
  }
  return std::move(*store);
}

bool Gateway::apply_state_event(const cluster::NodeEvent& ev) {
  const std::string backend(store_ ? store_->backend() : "none");
  metrics_.registry()
      .counter("cgn_router_state_events_total",
               "Node, prefix, policy and connection events applied from the state backend.",
               {"backend", "kind"})
      .with({backend, cluster::to_string(ev.kind)})
      .inc();
  switch (ev.kind) {
    case cluster::NodeEvent::Kind::kUpsert: {
      // A cordon flip is not a health change: apply the flag first and refresh
      // cgn_cluster_node_cordoned now (on_node_event then applies the whole update).
      if (ev.update.cordoned) {
        nodes_.locked([&](routing::RoutingCore& core, NodeTable::Nodes&) {
          const auto* st = core.node(ev.id);
          if (st != nullptr && st->cordoned != *ev.update.cordoned) {
            routing::NodeUpdate flag;
            flag.cordoned = ev.update.cordoned;
            core.upsert_node(ev.id, flag, ev.source);
            request_mirror_refresh();
          }
        });
      }
      return false;
    }
    case cluster::NodeEvent::Kind::kRemove:
      return false;
    case cluster::NodeEvent::Kind::kPrefixes:
      nodes_.locked([&](routing::RoutingCore& core, NodeTable::Nodes&) {
        const routing::NodeIndex idx = core.find_node(ev.id);
        if (idx == routing::kNoNode) {
          return;
        }
        if (!ev.removed.empty()) {
          core.remove_prefixes(idx, ev.removed);
        }
        if (!ev.confirmed.empty()) {
          core.confirm_prefixes(idx, ev.confirmed, ev.tier);
        }
      });
      return true;
    case cluster::NodeEvent::Kind::kPolicy: {
      if (!ev.policy) {
        return true;
      }
      const auto next = policy_from_config(*ev.policy);
      if (!next) {
        CGN_LOG_ERROR(router_log(), "policy from the state backend rejected; keeping the current policy",
                      log::kv("origin", ev.policy_origin), log::kv("error", next.error().message));
        return true;
      }
      std::string change;
      nodes_.locked([&](routing::RoutingCore& core, NodeTable::Nodes&) {
        change = describe_policy_change(core.policy(), *next);
        core.set_policy(*next);
        core.set_index_config(index_from_config(*ev.policy));
      });
      admission_.set_config(ev.policy->admission);
      CGN_LOG_INFO(router_log(), "routing policy applied from the state backend",
                   log::kv("origin", ev.policy_origin),
                   log::kv("changes", change.empty() ? std::string("none") : change));
      return true;
    }
    case cluster::NodeEvent::Kind::kBackend:
      metrics_.registry()
          .gauge("cgn_router_state_backend_up",
                 "1 while the router reaches its state backend (etcd), else 0.", {"backend"})
          .with({backend})
          .set(ev.connected ? 1 : 0);
      return true;
  }
  return true;
}

}  // namespace cgn::router
