// Cognitora's key layout in etcd (docs/architecture/etcd.md):
//   /cognitora/nodes/<node>           node record (JSON), on the node's heartbeat lease
//   /cognitora/kv/<node>/<digest hex> a live KV prefix held by <node>, same lease
//   /cognitora/cordon/<node>          cordon flag set by an operator (no lease)
//   /cognitora/policy                 routing policy (hot reload; no lease)
// Node ids are non-empty and contain no '/', so one node's prefix never
// covers another's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/digest_types.h"
#include "state/etcd/etcd_types.h"

namespace cgn::etcd::keys {

inline constexpr std::string_view kRoot = "/cognitora/";
inline constexpr std::string_view kNodesPrefix = "/cognitora/nodes/";
inline constexpr std::string_view kKvPrefix = "/cognitora/kv/";
inline constexpr std::string_view kCordonPrefix = "/cognitora/cordon/";
inline constexpr std::string_view kPolicyKey = "/cognitora/policy";

// kInvalidArgument for an empty id, or one holding '/' or a NUL byte.
EtcdStatus check_node_id(std::string_view node);

// Callers pass ids that passed check_node_id().
std::string node_key(std::string_view node);
std::string kv_prefix(std::string_view node);  // "/cognitora/kv/<node>/"
std::string kv_key(std::string_view node, const Digest& digest);
std::string cordon_key(std::string_view node);

// The node id at the end of a key under `prefix` (nodes/ or cordon/); nullopt
// when the key is not directly under it.
std::optional<std::string> node_of(std::string_view key, std::string_view prefix);
// The node and digest of a /cognitora/kv/<node>/<hex> key; nullopt if malformed.
std::optional<std::pair<std::string, Digest>> parse_kv_key(std::string_view key);

}  // namespace cgn::etcd::keys
