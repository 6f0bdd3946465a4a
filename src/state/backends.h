// The state backends built into cgn-router and cgn-agent, by name (src/cluster/backend_registry.h):
// "static" (static/), "etcd" (etcd/), "gossip" (gossip/). A new backend is a folder here with its
// own library and one line in backends.cpp.
#pragma once

#include "cluster/backend_registry.h"

namespace cgn::state {

const cluster::BackendRegistry& builtin_backends();

}  // namespace cgn::state
