// What the router knows about each node, and the one update type every source uses
// (metrics scrape, agent health, etcd node record, gossip, static config, operator).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "routing/types.h"

namespace cgn::routing {

enum class Health : uint8_t { kUnknown = 0, kHealthy = 1, kUnhealthy = 2 };

// Where an update came from; kept with the node for debugging and for staleness rules.
enum class UpdateSource : uint8_t { kScrape, kAgentHealth, kEtcd, kGossip, kStatic, kOperator };

// How the router knows that a node is alive.
//   kPolled:     the router's own checks refresh the node's state on a period (the static
//                backend's polls); state older than RoutingPolicy::max_staleness means the checks
//                stopped answering, and the node leaves routing until they answer again.
//   kMembership: the backend that announced the node removes it when it dies (etcd: the record's
//                lease expires; gossip: the failure detector declares the member dead). Its record
//                is rewritten only when its content changes, so its age says nothing about
//                liveness and max_staleness does not apply.
enum class Liveness : uint8_t { kPolled, kMembership };

std::string_view to_string(Health h);
std::string_view to_string(UpdateSource s);
std::string_view to_string(Liveness l);

// GPU identity as the agent publishes it. A node with no identity (all empty) is never
// filtered by capability rules: we do not know what it has.
struct GpuIdentity {
  std::string name;
  std::string vendor;
  uint64_t vram_total_mb = 0;

  bool known() const { return !name.empty() || !vendor.empty() || vram_total_mb != 0; }
};

struct NodeState {
  std::string id;
  std::string address;
  std::vector<std::string> models;
  std::string engine;  // "vllm", "sglang", "llamacpp", "trtllm", ...
  NodeRole role = NodeRole::kBoth;
  Health health = Health::kUnknown;
  bool cordoned = false;

  // Load, as last reported (requests, not tokens).
  double queue_depth = 0;
  double running = 0;
  double kv_used_ratio = 0;  // 0..1
  // KV pool size in engine blocks; 0 = unknown (never invented).
  uint64_t total_blocks = 0;
  uint64_t free_blocks = 0;
  uint32_t block_size_tokens = 0;  // engine block (page) size in tokens; 0 = unknown
  // Bumped by the agent on engine restart, pool resize or a large free-block jump: everything
  // the index believes about the node is void when it changes.
  uint64_t kv_epoch = 0;

  // Power draw; nullopt until the node reports one (never invented). watt_limit is the node's
  // soft limit; 0 = none.
  std::optional<double> power_watts;
  double watt_limit_watts = 0;
  // Cumulative energy (J) from the node's counters; nullopt = unknown. The router's gauges only.
  std::optional<double> energy_joules;

  GpuIdentity gpu;
  // Measured prefill speed of this node (tokens/s); 0 = use the policy default.
  double prefill_tokens_per_s = 0;

  Nanos refreshed_at = 0;  // clock time of the last update from any source
  UpdateSource last_source = UpdateSource::kStatic;
  Liveness liveness = Liveness::kPolled;

  bool serves(std::string_view model) const {
    for (const auto& m : models) {
      if (m == model) {
        return true;
      }
    }
    return false;
  }
};

// A partial update: only the fields that are set change. Every source fills what it knows.
struct NodeUpdate {
  std::optional<std::string> address;
  std::optional<std::vector<std::string>> models;
  std::optional<std::string> engine;
  std::optional<NodeRole> role;
  std::optional<Health> health;
  std::optional<bool> cordoned;
  std::optional<double> queue_depth;
  std::optional<double> running;
  std::optional<double> kv_used_ratio;
  std::optional<uint64_t> total_blocks;
  std::optional<uint64_t> free_blocks;
  std::optional<uint32_t> block_size_tokens;
  std::optional<uint64_t> kv_epoch;
  std::optional<double> power_watts;
  std::optional<double> watt_limit_watts;
  std::optional<double> energy_joules;  // like power_watts: NaN or negative clears it
  std::optional<GpuIdentity> gpu;
  std::optional<double> prefill_tokens_per_s;
  std::optional<Liveness> liveness;
};

// Applies `u` to `s` (clamping ratios to [0, 1] and counts to >= 0). Returns true when the
// change voids the index entries of the node (kv_epoch changed).
bool apply_update(NodeState& s, const NodeUpdate& u, UpdateSource source, Nanos now);

}  // namespace cgn::routing
