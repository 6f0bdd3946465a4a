// The gossip backend's registry entry (src/cluster/backend_registry.h): the router's GossipStore
// and the agent's RecordPublisher (gossip_store.h), both members of [state.gossip].
#pragma once

#include "cluster/backend_registry.h"

namespace cgn::gossip {

cluster::Backend gossip_backend();

}  // namespace cgn::gossip
