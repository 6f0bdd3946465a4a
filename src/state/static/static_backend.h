// The static backend's registry entry (src/cluster/backend_registry.h): the router's store polls
// [[router.nodes]]; the agent's publisher publishes nothing, because routers poll the agent.
#pragma once

#include <chrono>
#include <memory>

#include "cluster/agent_health.h"
#include "cluster/backend_registry.h"
#include "core/config.h"

namespace cgn::state {

// The static StateStore for [[router.nodes]], polled every `interval`. `security`: how agent
// nodes' gRPC service is called (cluster token, [tls]).
Result<std::unique_ptr<cluster::StateStore>, cluster::StateError> make_static_store(
    const config::RouterConfig& cfg, std::chrono::milliseconds interval, cluster::GrpcSecurity security = {});

cluster::Backend static_backend();

}  // namespace cgn::state
