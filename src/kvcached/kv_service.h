// cgn-kvcached's gRPC front: service cognitora.v1.KvCache (proto/cognitora/v1/kvcached.proto)
// over a BlockStore. Every request is decoded (wire.h) before the store is touched; a bad one is
// INVALID_ARGUMENT with a message naming the field. Blocks stream in kChunkBytes chunks: a put's
// chunks are copied straight into the reserved arena space (two-phase: a stream that breaks or
// carries the wrong length leaves nothing visible), a get's chunks straight from the pinned block.
//
// Threads: grpc++'s synchronous server runs the calls on its own threads; the store is
// thread-safe. start()/stop() belong to the owning thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/config.h"
#include "core/result.h"
#include "kvcache/block_store.h"

namespace grpc {
class Server;
}

namespace cgn::kvcached {

class KvcachedMetrics;

enum class ServiceError : uint8_t { kListen };

class KvGrpcServer {
 public:
  // Binds `listen` (port 0: any free port) with [tls]'s credentials and serves. `store`,
  // `metrics` and `clock` (the store's) must outlive the server.
  static Result<std::unique_ptr<KvGrpcServer>, ServiceError> start(
      const std::string& listen, const config::TlsConfig& tls, kvcache::BlockStore& store,
      uint64_t max_block_bytes, KvcachedMetrics& metrics, const Clock& clock);
  ~KvGrpcServer();
  KvGrpcServer(const KvGrpcServer&) = delete;
  KvGrpcServer& operator=(const KvGrpcServer&) = delete;

  uint16_t port() const { return port_; }
  // Stops accepting calls, lets running ones finish up to `grace`, cancels the rest. Idempotent.
  void stop(std::chrono::milliseconds grace);

  class Service;

 private:
  KvGrpcServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
};

// Store clock time -> Unix milliseconds (for lease deadlines on the wire); 0 stays 0.
uint64_t to_unix_ms(Nanos store_time, const Clock& clock);

}  // namespace cgn::kvcached
