#include "routing/node_state.h"

#include <algorithm>
#include <cmath>

namespace cgn::routing {

std::string_view to_string(Health h) {
  switch (h) {
    case Health::kUnknown:
      return "unknown";
    case Health::kHealthy:
      return "healthy";
    case Health::kUnhealthy:
      return "unhealthy";
  }
  return "unknown";
}

std::string_view to_string(UpdateSource s) {
  switch (s) {
    case UpdateSource::kScrape:
      return "scrape";
    case UpdateSource::kAgentHealth:
      return "agent_health";
    case UpdateSource::kEtcd:
      return "etcd";
    case UpdateSource::kGossip:
      return "gossip";
    case UpdateSource::kStatic:
      return "static";
    case UpdateSource::kOperator:
      return "operator";
  }
  return "static";
}

std::string_view to_string(Liveness l) {
  switch (l) {
    case Liveness::kPolled:
      return "polled";
    case Liveness::kMembership:
      return "membership";
  }
  return "polled";
}

std::string_view to_string(Tier t) {
  switch (t) {
    case Tier::kEngine:
      return "engine";
    case Tier::kRam:
      return "ram";
    case Tier::kSsd:
      return "ssd";
  }
  return "engine";
}

std::string_view to_string(NodeRole r) {
  switch (r) {
    case NodeRole::kBoth:
      return "both";
    case NodeRole::kPrefill:
      return "prefill";
    case NodeRole::kDecode:
      return "decode";
  }
  return "both";
}

std::optional<NodeRole> parse_node_role(std::string_view s) {
  if (s == "both" || s.empty()) {
    return NodeRole::kBoth;
  }
  if (s == "prefill") {
    return NodeRole::kPrefill;
  }
  if (s == "decode") {
    return NodeRole::kDecode;
  }
  return std::nullopt;
}

namespace {

double non_negative(double v) {
  return std::isfinite(v) && v > 0 ? v : 0.0;
}
double ratio(double v) {
  return std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0;
}

}  // namespace

bool apply_update(NodeState& s, const NodeUpdate& u, UpdateSource source, Nanos now) {
  bool epoch_changed = false;
  if (u.address) {
    s.address = *u.address;
  }
  if (u.models) {
    s.models = *u.models;
  }
  if (u.engine) {
    s.engine = *u.engine;
  }
  if (u.role) {
    s.role = *u.role;
  }
  if (u.health) {
    s.health = *u.health;
  }
  if (u.cordoned) {
    s.cordoned = *u.cordoned;
  }
  if (u.queue_depth) {
    s.queue_depth = non_negative(*u.queue_depth);
  }
  if (u.running) {
    s.running = non_negative(*u.running);
  }
  if (u.kv_used_ratio) {
    s.kv_used_ratio = ratio(*u.kv_used_ratio);
  }
  if (u.total_blocks) {
    s.total_blocks = *u.total_blocks;
  }
  if (u.free_blocks) {
    s.free_blocks = *u.free_blocks;
  }
  if (u.block_size_tokens) {
    s.block_size_tokens = *u.block_size_tokens;
  }
  if (u.kv_epoch) {
    epoch_changed = *u.kv_epoch != s.kv_epoch;
    s.kv_epoch = *u.kv_epoch;
  }
  if (u.power_watts) {
    // A reading that is not a number or below zero is no reading.
    s.power_watts = std::isfinite(*u.power_watts) && *u.power_watts >= 0 ? u.power_watts : std::nullopt;
  }
  if (u.energy_joules) {
    s.energy_joules =
        std::isfinite(*u.energy_joules) && *u.energy_joules >= 0 ? u.energy_joules : std::nullopt;
  }
  if (u.watt_limit_watts) {
    s.watt_limit_watts = non_negative(*u.watt_limit_watts);
  }
  if (u.gpu) {
    s.gpu = *u.gpu;
  }
  if (u.prefill_tokens_per_s) {
    s.prefill_tokens_per_s = non_negative(*u.prefill_tokens_per_s);
  }
  if (u.liveness) {
    s.liveness = *u.liveness;
  }
  s.refreshed_at = now;
  s.last_source = source;
  return epoch_changed;
}

}  // namespace cgn::routing
