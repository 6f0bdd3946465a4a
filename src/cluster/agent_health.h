// What a cgn-agent answers to the gRPC Health call (service cognitora.v1.Agent,
// proto/cognitora/v1/agent.proto): its node record and the engine supervisor's state, the mapping
// between both and their protobuf form, and who may call (GrpcSecurity). The agent's server
// (src/agent/agent_grpc.h) and the static backend's poller (src/state/static/) both use it, so it
// lives in the cluster contract. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "cluster/node_record.h"
#include "core/cluster_token.h"
#include "core/config.h"
#include "core/result.h"

namespace cognitora::v1 {
class NodeRecord;
class HealthResponse;
}  // namespace cognitora::v1

namespace cgn::cluster {

// The engine supervisor's state, as the agent reports it.
enum class EngineState : uint8_t { kStarting, kReady, kUnhealthy, kExited, kRestarting, kStopped };

std::string_view to_string(EngineState s);

// What Health answers.
struct AgentHealth {
  NodeRecord record;
  EngineState engine_state = EngineState::kStopped;
  uint64_t engine_starts = 0;

  bool operator==(const AgentHealth&) const = default;
};

void to_proto(const NodeRecord& record, cognitora::v1::NodeRecord* out);
void to_proto(const AgentHealth& health, cognitora::v1::HealthResponse* out);

// The record from its protobuf form, checked like parse_node_record(): node_id, address and
// engine non-empty, a known role, finite non-negative numbers, and the string/model limits. The
// error names the field.
Result<NodeRecord, RecordError> from_proto(const cognitora::v1::NodeRecord& record,
                                           const RecordLimits& limits = {});
// Also rejects an unknown engine state.
Result<AgentHealth, RecordError> from_proto(const cognitora::v1::HealthResponse& health,
                                            const RecordLimits& limits = {});

// Largest Health answer a client accepts (the record is bounded by RecordLimits well below it).
inline constexpr int kMaxHealthResponseBytes = 256 * 1024;

// Who may call the Agent service, and how the link is protected ([cluster], [tls];
// docs/security.md). Servers refuse a call without one of the cluster tokens (UNAUTHENTICATED)
// unless its TLS client certificate was verified; clients present the first token and, with
// [tls], their certificate. Default: plaintext, anyone.
struct GrpcSecurity {
  auth::ClusterToken token;
  config::TlsConfig tls;
};

}  // namespace cgn::cluster
