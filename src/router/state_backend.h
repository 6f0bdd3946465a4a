// The router's state backend, chosen by cognitora.toml's `state_backend`: "static" (the
// [[router.nodes]] list, polled), "etcd" ([state.etcd], watched; src/state/etcd_store.h) or
// "gossip" ([state.gossip], UDP membership; src/state/gossip/gossip_store.h). Gateway::apply_state_event
// (state_backend.cpp) applies what only the etcd backend sends: live KV prefixes, the policy key and the
// connection state.
#pragma once

#include <chrono>
#include <memory>

#include "core/config.h"
#include "core/result.h"
#include "router/gateway.h"
#include "state/state_store.h"

namespace cgn::router {

// Builds the configured backend. For etcd, `cfg.router` is the policy in force while
// /cognitora/policy is absent.
Result<std::unique_ptr<state::StateStore>, GatewayError> make_state_store(
    const config::CognitoraConfig& cfg, std::chrono::milliseconds poll_interval);

}  // namespace cgn::router
