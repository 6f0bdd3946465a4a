// The agent's gRPC front: service cognitora.v1.Agent (proto/cognitora/v1/agent.proto). Health
// returns the node record (node_record.h) and the engine supervisor's state. Also the mapping
// between the record and its protobuf form, used by the server here and by clients (the router's
// static backend, tests), and a blocking Health call for tools and tests.
//
// Threads: AgentGrpcServer runs grpc++'s synchronous server, whose own threads call the snapshot
// function; it must be thread-safe (NodeAgent::record() and the Supervisor's state() are).
// start()/stop() belong to the owning thread. The conversions are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "agent/node_record.h"
#include "agent/supervisor.h"
#include "core/cluster_token.h"
#include "core/config.h"
#include "core/result.h"

namespace grpc {
class Server;
}

namespace cognitora::v1 {
class NodeRecord;
class HealthResponse;
}  // namespace cognitora::v1

namespace cgn::agent {

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

enum class GrpcError : uint8_t {
  kListen,  // the server could not bind or start
  kCall,    // the call failed (unreachable, deadline, status not OK)
  kAnswer,  // the answer does not hold a valid record
};

std::string_view to_string(GrpcError e);

using AgentHealthSource = std::function<AgentHealth()>;

// Who may call the Agent service, and how the link is protected ([cluster], [tls];
// docs/security.md). Servers refuse a call without one of the cluster tokens (UNAUTHENTICATED)
// unless its TLS client certificate was verified; clients present the first token and, with
// [tls], their certificate. Default: plaintext, anyone.
struct GrpcSecurity {
  auth::ClusterToken token;
  config::TlsConfig tls;
};

class AgentGrpcServer {
 public:
  // Binds `listen` ("host:port"; port 0 = any free port, see port()) and starts serving.
  static Result<std::unique_ptr<AgentGrpcServer>, GrpcError> start(const std::string& listen,
                                                                   AgentHealthSource source,
                                                                   GrpcSecurity security = {});
  ~AgentGrpcServer();
  AgentGrpcServer(const AgentGrpcServer&) = delete;
  AgentGrpcServer& operator=(const AgentGrpcServer&) = delete;

  // The bound port.
  uint16_t port() const { return port_; }
  // Stops accepting calls, lets running ones finish (up to `grace`) and joins. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(1000));

  class Service;

 private:
  AgentGrpcServer() = default;

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
};

// One blocking Health call to `target` ("host:port") with a deadline. A new channel per call:
// for tools and tests, not for polling loops.
Result<AgentHealth, GrpcError> call_agent_health(const std::string& target, std::chrono::milliseconds timeout,
                                                 const GrpcSecurity& security = {});

}  // namespace cgn::agent
