#include "router/state_backend.h"

#include "router/policy_config.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd_store.h"
#include "state/gossip/gossip_store.h"

namespace cgn::router {

Result<std::unique_ptr<state::StateStore>, GatewayError> make_state_store(
    const config::CognitoraConfig& cfg, std::chrono::milliseconds poll_interval) {
  const std::string& backend = cfg.router.state_backend;
  if (backend == "static") {
    // A polled node's state is up to one poll period old between polls: a shorter bound would
    // take every node out of routing between two polls.
    const uint32_t stale_ms = cfg.router.routing.max_staleness_ms;
    if (stale_ms != 0 && std::chrono::milliseconds(stale_ms) <= poll_interval) {
      return make_error(GatewayError::kConfig,
                        "[router.routing] max_staleness_ms = " + std::to_string(stale_ms) +
                            " must exceed the poll period (" + std::to_string(poll_interval.count()) +
                            " ms: [router.timeouts] health_interval_ms or --poll-interval-ms), or be 0");
    }
    return make_static_store(cfg.router, poll_interval,
                             agent::GrpcSecurity{auth::ClusterToken(cfg.cluster.tokens), cfg.tls});
  }
  if (backend == "etcd") {
    if (!cfg.router.nodes.empty()) {
      return make_error(GatewayError::kConfig,
                        "state_backend \"etcd\" takes its nodes from etcd; remove the [[router.nodes]] "
                        "entries (or --node flags)");
    }
    state::EtcdStoreOptions o;
    o.client = etcd::client_options_from_config(cfg.state.etcd);
    o.endpoints = cfg.state.etcd.endpoints;
    o.root = cfg.state.etcd.prefix;
    o.base = cfg.router;
    auto store = state::EtcdStore::create(std::move(o));
    if (!store) {
      return make_error(GatewayError::kConfig, store.error().message);
    }
    return std::unique_ptr<state::StateStore>(std::move(*store));
  }
  if (backend == "gossip") {
    // Members are discovered over UDP ([state.gossip]); [[router.nodes]] are not used.
    if (!cfg.router.nodes.empty()) {
      return make_error(GatewayError::kConfig,
                        "state_backend \"gossip\" discovers its nodes by gossip; remove the [[router.nodes]] "
                        "entries (or --node flags)");
    }
    auto store = gossip::make_router_store(cfg);
    if (!store) {
      return make_error(GatewayError::kConfig, store.error().message);
    }
    return std::unique_ptr<state::StateStore>(std::move(*store));
  }
  return make_error(GatewayError::kConfig,
                    "state_backend \"" + backend +
                        "\" is not available in this cgn-router; use \"static\", \"etcd\" "
                        "or \"gossip\"");
}

bool Gateway::apply_state_event(const state::NodeEvent& ev) {
  const std::string backend(store_ ? store_->backend() : "none");
  metrics_.registry()
      .counter("cgn_router_state_events_total",
               "Node, prefix, policy and connection events applied from the state backend.",
               {"backend", "kind"})
      .with({backend, state::to_string(ev.kind)})
      .inc();
  switch (ev.kind) {
    case state::NodeEvent::Kind::kUpsert: {
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
    case state::NodeEvent::Kind::kRemove:
      return false;
    case state::NodeEvent::Kind::kPrefixes:
      nodes_.locked([&](routing::RoutingCore& core, NodeTable::Nodes&) {
        const routing::NodeIndex idx = core.find_node(ev.id);
        if (idx == routing::kNoNode) {
          return;
        }
        if (!ev.removed.empty()) {
          core.remove_prefixes(idx, ev.removed);
        }
        if (!ev.confirmed.empty()) {
          core.confirm_prefixes(idx, ev.confirmed);
        }
      });
      return true;
    case state::NodeEvent::Kind::kPolicy: {
      if (!ev.policy) {
        return true;
      }
      const auto next = policy_from_config(*ev.policy);
      std::string change;
      nodes_.locked([&](routing::RoutingCore& core, NodeTable::Nodes&) {
        change = describe_policy_change(core.policy(), next);
        core.set_policy(next);
        core.set_index_config(index_from_config(*ev.policy));
      });
      admission_.set_config(ev.policy->admission);
      CGN_LOG_INFO(log::get("router"), "routing policy applied from the state backend",
                   log::kv("origin", ev.policy_origin),
                   log::kv("changes", change.empty() ? std::string("none") : change));
      return true;
    }
    case state::NodeEvent::Kind::kBackend:
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
