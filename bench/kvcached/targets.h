// The replay's two ways into a running cgn-kvcached: gRPC (KvClient) and the local fast path
// (LocalClient; Stats still over gRPC, the fast path has none). Both name blocks by
// replay.h's block_digest() under one fixed namespace.
#pragma once

#include <memory>

#include "kvcache/block_key.h"
#include "kvcached/kv_client.h"
#include "kvcached/local_client.h"
#include "replay.h"

namespace cgn::kvbench {

// The namespace every benchmark block lives in (512 tokens a block, as the trace's hash_ids).
kvcache::BlockNamespace bench_namespace();

class GrpcReplayTarget final : public ReplayTarget {
 public:
  explicit GrpcReplayTarget(kvcached::KvClient& client) : client_(client), ns_(bench_namespace()) {}
  Result<std::vector<kvcache::Tier>, BenchError> lookup(std::span<const uint64_t> ids) override;
  Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) override;
  Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) override;
  Result<kvcache::StoreStats, BenchError> stats() override;

 private:
  kvcached::KvClient& client_;
  kvcache::BlockNamespace ns_;
};

class LocalReplayTarget final : public ReplayTarget {
 public:
  // `control` answers stats().
  LocalReplayTarget(kvcached::LocalClient& client, kvcached::KvClient& control);
  Result<std::vector<kvcache::Tier>, BenchError> lookup(std::span<const uint64_t> ids) override;
  Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) override;
  Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) override;
  Result<kvcache::StoreStats, BenchError> stats() override;

 private:
  kvcached::LocalClient& client_;
  kvcached::KvClient& control_;
  kvcache::KeyDeriver keys_;
};

// Replays `w` through the daemon at `grpc` (host:port), through its fast path when `socket` is
// non-empty (Stats still over gRPC): the report as to_json() writes it.
Result<std::string, BenchError> replay_daemon(const bench::Workload& w, const std::string& grpc,
                                              const std::string& socket, const ReplayOptions& opt);

}  // namespace cgn::kvbench
