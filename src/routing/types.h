// Small value types shared by every part of the routing core.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace cgn::routing {

// Dense per-router node number (0..kMaxNodes-1); the string node id lives in the node table.
// Dense numbers keep the prefix index small (2 bytes per holder) and let the score use
// flat arrays instead of maps.
using NodeIndex = uint16_t;
inline constexpr NodeIndex kNoNode = 0xFFFF;
inline constexpr uint32_t kMaxNodes = 4096;

// Where a node holds a cached block. Engine = the engine's own GPU/device KV; RAM and SSD =
// the node's cgn-kvcached tiers (the engine must load it back first, so it counts less).
enum class Tier : uint8_t { kEngine = 0, kRam = 1, kSsd = 2 };

// Optimistic entries are the router's own guess after a dispatch (they expire after a TTL);
// confirmed entries come from live KV prefixes published by the node and outrank guesses.
enum class EntryState : uint8_t { kOptimistic = 0, kConfirmed = 1 };

// What a node does in a disaggregated deployment.
enum class NodeRole : uint8_t { kBoth = 0, kPrefill = 1, kDecode = 2 };

// What a request needs from a node. kAny accepts every role.
enum class RoleWanted : uint8_t { kAny = 0, kPrefill = 1, kDecode = 2, kBoth = 3 };

std::string_view to_string(Tier t);
std::string_view to_string(NodeRole r);
std::optional<NodeRole> parse_node_role(std::string_view s);

// True when a node of role `have` may serve a request that wants `want`.
constexpr bool role_fits(NodeRole have, RoleWanted want) {
  switch (want) {
    case RoleWanted::kAny:
      return true;
    case RoleWanted::kPrefill:
      return have == NodeRole::kPrefill || have == NodeRole::kBoth;
    case RoleWanted::kDecode:
      return have == NodeRole::kDecode || have == NodeRole::kBoth;
    case RoleWanted::kBoth:
      return have == NodeRole::kBoth;
  }
  return false;
}

}  // namespace cgn::routing
