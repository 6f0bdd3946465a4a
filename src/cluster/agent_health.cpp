#include "cluster/agent_health.h"

#include <fmt/format.h>

#include <cmath>

#include "cognitora/v1/agent.pb.h"

namespace cgn::cluster {

namespace pb = cognitora::v1;

std::string_view to_string(EngineState s) {
  switch (s) {
    case EngineState::kStarting:
      return "starting";
    case EngineState::kReady:
      return "ready";
    case EngineState::kUnhealthy:
      return "unhealthy";
    case EngineState::kExited:
      return "exited";
    case EngineState::kRestarting:
      return "restarting";
    case EngineState::kStopped:
      return "stopped";
  }
  return "unknown";
}

namespace {

pb::NodeRole role_to_proto(routing::NodeRole r) {
  switch (r) {
    case routing::NodeRole::kPrefill:
      return pb::NODE_ROLE_PREFILL;
    case routing::NodeRole::kDecode:
      return pb::NODE_ROLE_DECODE;
    case routing::NodeRole::kBoth:
      return pb::NODE_ROLE_BOTH;
  }
  return pb::NODE_ROLE_UNSPECIFIED;
}

pb::EngineState state_to_proto(EngineState s) {
  switch (s) {
    case EngineState::kStarting:
      return pb::ENGINE_STATE_STARTING;
    case EngineState::kReady:
      return pb::ENGINE_STATE_READY;
    case EngineState::kUnhealthy:
      return pb::ENGINE_STATE_UNHEALTHY;
    case EngineState::kExited:
      return pb::ENGINE_STATE_EXITED;
    case EngineState::kRestarting:
      return pb::ENGINE_STATE_RESTARTING;
    case EngineState::kStopped:
      return pb::ENGINE_STATE_STOPPED;
  }
  return pb::ENGINE_STATE_UNSPECIFIED;
}

Error<RecordError> shape(std::string_view field, std::string_view why) {
  return make_error(RecordError::kShape, fmt::format("record field '{}': {}", field, why));
}

Status<RecordError> check_string(std::string_view field, const std::string& s, const RecordLimits& limits,
                                 bool required) {
  if (required && s.empty()) {
    return shape(field, "is required");
  }
  if (s.size() > limits.max_string) {
    return shape(field, fmt::format("longer than {} bytes", limits.max_string));
  }
  return Ok{};
}

Status<RecordError> check_number(std::string_view field, double v) {
  if (!std::isfinite(v) || v < 0) {
    return shape(field, "must be a finite non-negative number");
  }
  return Ok{};
}

}  // namespace

void to_proto(const NodeRecord& r, pb::NodeRecord* out) {
  out->set_node_id(r.node_id);
  out->set_address(r.address);
  for (const auto& m : r.models) {
    out->add_models(m);
  }
  out->set_engine(r.engine);
  out->set_role(role_to_proto(r.role));
  out->set_ready(r.ready);
  if (r.gpu) {
    auto* g = out->mutable_gpu();
    g->set_name(r.gpu->gpu_name);
    g->set_vendor(r.gpu->gpu_vendor);
    g->set_vram_total_mb(r.gpu->vram_total_mb);
    g->set_count(r.gpu->count);
  }
  out->set_total_blocks(r.total_blocks);
  if (r.free_blocks) {
    out->set_free_blocks(*r.free_blocks);
  }
  out->set_block_size(r.block_size);
  if (r.queue_depth) {
    out->set_queue_depth(*r.queue_depth);
  }
  if (r.running) {
    out->set_running(*r.running);
  }
  out->set_kv_epoch(r.kv_epoch);
  if (r.power_watts) {
    out->set_power_watts(*r.power_watts);
  }
  if (r.energy_joules) {
    out->set_energy_joules(*r.energy_joules);
  }
  out->set_watt_limit(r.watt_limit);
  out->set_cordon(r.cordon);
  out->set_version(r.version);
  out->set_generation(r.generation);
}

void to_proto(const AgentHealth& h, pb::HealthResponse* out) {
  to_proto(h.record, out->mutable_record());
  out->set_engine_state(state_to_proto(h.engine_state));
  out->set_engine_starts(h.engine_starts);
}

Result<NodeRecord, RecordError> from_proto(const pb::NodeRecord& in, const RecordLimits& limits) {
  NodeRecord r;
  if (auto st = check_string("node_id", in.node_id(), limits, true); !st) {
    return st.error();
  }
  if (auto st = check_string("address", in.address(), limits, true); !st) {
    return st.error();
  }
  if (auto st = check_string("engine", in.engine(), limits, true); !st) {
    return st.error();
  }
  if (auto st = check_string("version", in.version(), limits, false); !st) {
    return st.error();
  }
  r.node_id = in.node_id();
  r.address = in.address();
  r.engine = in.engine();
  r.version = in.version();
  if (static_cast<size_t>(in.models_size()) > limits.max_models) {
    return shape("models", fmt::format("more than {} models", limits.max_models));
  }
  for (const auto& m : in.models()) {
    if (auto st = check_string("models", m, limits, true); !st) {
      return st.error();
    }
    r.models.push_back(m);
  }
  switch (in.role()) {
    case pb::NODE_ROLE_PREFILL:
      r.role = routing::NodeRole::kPrefill;
      break;
    case pb::NODE_ROLE_DECODE:
      r.role = routing::NodeRole::kDecode;
      break;
    case pb::NODE_ROLE_BOTH:
      r.role = routing::NodeRole::kBoth;
      break;
    default:
      return shape("role", fmt::format("unknown role {}", static_cast<int>(in.role())));
  }
  r.ready = in.ready();
  if (in.has_gpu()) {
    GpuIdentity g;
    if (auto st = check_string("gpu.name", in.gpu().name(), limits, false); !st) {
      return st.error();
    }
    if (auto st = check_string("gpu.vendor", in.gpu().vendor(), limits, false); !st) {
      return st.error();
    }
    g.gpu_name = in.gpu().name();
    g.gpu_vendor = in.gpu().vendor();
    g.vram_total_mb = in.gpu().vram_total_mb();
    g.count = in.gpu().count();
    r.gpu = std::move(g);
  }
  r.total_blocks = in.total_blocks();
  if (in.has_free_blocks()) {
    r.free_blocks = in.free_blocks();
  }
  r.block_size = in.block_size();
  if (in.has_queue_depth()) {
    if (auto st = check_number("queue_depth", in.queue_depth()); !st) {
      return st.error();
    }
    r.queue_depth = in.queue_depth();
  }
  if (in.has_running()) {
    if (auto st = check_number("running", in.running()); !st) {
      return st.error();
    }
    r.running = in.running();
  }
  r.kv_epoch = in.kv_epoch();
  if (in.has_power_watts()) {
    if (auto st = check_number("power_watts", in.power_watts()); !st) {
      return st.error();
    }
    r.power_watts = in.power_watts();
  }
  if (in.has_energy_joules()) {
    if (auto st = check_number("energy_joules", in.energy_joules()); !st) {
      return st.error();
    }
    r.energy_joules = in.energy_joules();
  }
  if (auto st = check_number("watt_limit", in.watt_limit()); !st) {
    return st.error();
  }
  r.watt_limit = in.watt_limit();
  r.cordon = in.cordon();
  r.generation = in.generation();
  return r;
}

Result<AgentHealth, RecordError> from_proto(const pb::HealthResponse& in, const RecordLimits& limits) {
  if (!in.has_record()) {
    return shape("record", "is required");
  }
  auto record = from_proto(in.record(), limits);
  if (!record) {
    return record.error();
  }
  AgentHealth h;
  h.record = std::move(*record);
  h.engine_starts = in.engine_starts();
  switch (in.engine_state()) {
    case pb::ENGINE_STATE_STARTING:
      h.engine_state = EngineState::kStarting;
      break;
    case pb::ENGINE_STATE_READY:
      h.engine_state = EngineState::kReady;
      break;
    case pb::ENGINE_STATE_UNHEALTHY:
      h.engine_state = EngineState::kUnhealthy;
      break;
    case pb::ENGINE_STATE_EXITED:
      h.engine_state = EngineState::kExited;
      break;
    case pb::ENGINE_STATE_RESTARTING:
      h.engine_state = EngineState::kRestarting;
      break;
    case pb::ENGINE_STATE_STOPPED:
      h.engine_state = EngineState::kStopped;
      break;
    default:
      return make_error(RecordError::kShape,
                        fmt::format("engine_state: unknown state {}", static_cast<int>(in.engine_state())));
  }
  return h;
}

}  // namespace cgn::cluster
