// The agent's gRPC front: service cognitora.v1.Agent (proto/cognitora/v1/agent.proto). Health
// returns the node record and the engine supervisor's state (src/cluster/agent_health.h holds
// that answer, its protobuf mapping and GrpcSecurity), and a blocking Health call for tools and
// tests.
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

#include "agent/supervisor.h"
#include "cluster/agent_health.h"
#include "core/cluster_token.h"
#include "core/config.h"
#include "core/result.h"

namespace grpc {
class Server;
}

namespace cgn::agent {

enum class GrpcError : uint8_t {
  kListen,  // the server could not bind or start
  kCall,    // the call failed (unreachable, deadline, status not OK)
  kAnswer,  // the answer does not hold a valid record
};

std::string_view to_string(GrpcError e);

using AgentHealthSource = std::function<cluster::AgentHealth()>;

class AgentGrpcServer {
 public:
  // Binds `listen` ("host:port"; port 0 = any free port, see port()) and starts serving.
  static Result<std::unique_ptr<AgentGrpcServer>, GrpcError> start(const std::string& listen,
                                                                   AgentHealthSource source,
                                                                   cluster::GrpcSecurity security = {});
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
Result<cluster::AgentHealth, GrpcError> call_agent_health(const std::string& target,
                                                          std::chrono::milliseconds timeout,
                                                          const cluster::GrpcSecurity& security = {});

}  // namespace cgn::agent
