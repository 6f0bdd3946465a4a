// The router's state backend, looked up by cognitora.toml's `state_backend` in the registry of
// built-in backends (src/state/backends.h): "static" (the [[router.nodes]] list, polled;
// src/state/static/), "etcd" ([state.etcd], watched; src/state/etcd/) or "gossip" ([state.gossip],
// UDP membership; src/state/gossip/). Gateway::apply_state_event
// (state_backend.cpp) applies what only the etcd backend sends: live KV prefixes, the policy key and the
// connection state.
#pragma once

#include <chrono>
#include <memory>

#include "cluster/state_store.h"
#include "core/config.h"
#include "core/result.h"
#include "router/gateway.h"

namespace cgn::router {

// Builds the configured backend. For etcd, `cfg.router` is the policy in force while
// /cognitora/policy is absent.
Result<std::unique_ptr<cluster::StateStore>, GatewayError> make_state_store(
    const config::CognitoraConfig& cfg, std::chrono::milliseconds poll_interval);

}  // namespace cgn::router
