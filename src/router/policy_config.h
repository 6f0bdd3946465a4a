// cognitora.toml's [router.routing] (milliseconds, operator-facing) -> the routing core's
// RoutingPolicy (seconds, tokens). The mapping, term by term, is in docs/architecture/router.md.
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "core/config.h"
#include "core/result.h"
#include "routing/policies.h"
#include "routing/prefix_index.h"

namespace cgn::router {

// `[router] policy` names a registered routing policy (routing/policies.h); an unknown name is an
// error that lists the registered ones.
Result<routing::RoutingPolicy, routing::PolicyError> policy_from_config(const config::RouterConfig& cfg);
routing::IndexConfig index_from_config(const config::RouterConfig& cfg);

// "policy kv -> least_load, queue_seconds 0.05 -> 0.1" (empty when nothing differs).
std::string describe_policy_change(const routing::RoutingPolicy& before, const routing::RoutingPolicy& after);

}  // namespace cgn::router
