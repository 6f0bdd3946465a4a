// The etcd backend's registry entry (src/cluster/backend_registry.h): the router's EtcdStore
// watches [state.etcd]; the agent's publisher is the EtcdPublisher (etcd_publisher.h) writing to it,
// with its counters on the agent's /metrics.
#pragma once

#include "cluster/backend_registry.h"

namespace cgn::state {

cluster::Backend etcd_backend();

}  // namespace cgn::state
