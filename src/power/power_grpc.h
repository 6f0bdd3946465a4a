// cgn-power's gRPC service cognitora.v1.Power (proto/cognitora/v1/power.proto) and its client. The
// server answers Read from a Reader's snapshot; the client (the agent, when a daemon is configured)
// turns the answer back into a Snapshot. TLS from [tls] through the shared helper (core/tls).
//
// Threads: the server's calls run on gRPC's threads and only read the Reader (thread-safe); the
// client is one channel, safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "core/result.h"
#include "power/reader.h"

namespace grpc {
class Server;
class Channel;
}  // namespace grpc
namespace cognitora::v1 {
class PowerReadReply;
}

namespace cgn::power {

enum class GrpcError : uint8_t { kListen, kTls, kCall };

void to_proto(const Snapshot& s, cognitora::v1::PowerReadReply& out);
Snapshot from_proto(const cognitora::v1::PowerReadReply& in);

class PowerGrpcServer {
 public:
  // Binds `listen` (port 0: any free port) with [tls]'s credentials. `reader` must outlive it.
  static Result<std::unique_ptr<PowerGrpcServer>, GrpcError> start(const std::string& listen,
                                                                   const config::TlsConfig& tls,
                                                                   const Reader& reader);
  ~PowerGrpcServer();
  PowerGrpcServer(const PowerGrpcServer&) = delete;
  PowerGrpcServer& operator=(const PowerGrpcServer&) = delete;

  uint16_t port() const { return port_; }
  // Stops at once (Read never runs long; `grace` is kept for the daemons' common shape). Idempotent.
  void stop(std::chrono::milliseconds grace);

  class Service;

 private:
  PowerGrpcServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
};

class PowerClient {
 public:
  // `target`: HOST:PORT of cgn-power's `[power] listen`; credentials from [tls].
  static Result<std::unique_ptr<PowerClient>, GrpcError> connect(const std::string& target,
                                                                 const config::TlsConfig& tls);
  ~PowerClient();
  PowerClient(const PowerClient&) = delete;
  PowerClient& operator=(const PowerClient&) = delete;
  Result<Snapshot, GrpcError> read(std::chrono::milliseconds timeout) const;

 private:
  struct Stub;  // the channel and its generated stub, made once in connect()
  PowerClient() = default;
  std::unique_ptr<Stub> stub_;
};

}  // namespace cgn::power
