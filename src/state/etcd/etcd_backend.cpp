#include "state/etcd/etcd_backend.h"

#include "state/etcd/etcd_client.h"
#include "state/etcd/etcd_store.h"

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

}  // namespace

cluster::Backend etcd_backend() {
  return {.name = "etcd", .make_store = make_store, .make_publisher = {}};
}

}  // namespace cgn::state
