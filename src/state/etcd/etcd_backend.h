// The etcd backend's registry entry (src/cluster/backend_registry.h): the router's EtcdStore
// watches [state.etcd]; the agent's publisher is agent/etcd_publisher.h (it moves here once its
// KV-event plumbing is part of the publisher contract).
#pragma once

#include "cluster/backend_registry.h"

namespace cgn::state {

cluster::Backend etcd_backend();

}  // namespace cgn::state
