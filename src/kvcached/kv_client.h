// The gRPC client of cgn-kvcached's KvCache service (proto/cognitora/v1/kvcached.proto): the
// remote path and the control plane. Blocks travel in chunks (kChunkBytes), so a block of many
// MiB never has to fit one gRPC message.
//
//   auto c = KvClient::connect("127.0.0.1:9400", cfg.tls);
//   c->put(ns, digest, bytes);                   // -> already_resident
//   auto bytes = c->get(ns, digest);             // -> the block
//   auto runs = c->batch_lookup(ns, {{d1, d2}, {d3}}, 5000);
//
// Errors carry the daemon's message (or the transport's); the code maps the gRPC status
// (NOT_FOUND -> kNotFound, INVALID_ARGUMENT -> kInvalid, UNAVAILABLE -> kConnect, ...).
//
// Threads: a KvClient is thread-safe (one gRPC channel; each call is independent).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/digest_types.h"
#include "core/result.h"
#include "kvcache/block_key.h"
#include "kvcache/store_types.h"
#include "kvcached/client_error.h"

namespace grpc {
class Channel;
}

namespace cgn::kvcached {

struct KvLookup {
  std::vector<std::vector<kvcache::Tier>> runs;  // per request: the unbroken resident run
  uint64_t lease_until_unix_ms = 0;              // 0: nothing leased
};

class KvClient {
 public:
  // A channel to `target` ("host:port") with [tls]'s credentials. Fails only on unreadable PEM
  // files; an unreachable daemon fails the first call.
  static Result<std::unique_ptr<KvClient>, ClientError> connect(const std::string& target,
                                                                const config::TlsConfig& tls);
  ~KvClient();
  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  // true: the block was already resident (its recency refreshed, nothing written).
  Result<bool, ClientError> put(const kvcache::BlockNamespace& ns, const Digest& digest,
                                std::span<const uint8_t> value);
  Result<std::vector<uint8_t>, ClientError> get(const kvcache::BlockNamespace& ns, const Digest& digest);
  // Into `out` (out.size() >= the length): the block's length; kTooLarge when out is too small.
  Result<uint64_t, ClientError> get(const kvcache::BlockNamespace& ns, const Digest& digest,
                                    std::span<uint8_t> out);
  Result<KvLookup, ClientError> batch_lookup(const kvcache::BlockNamespace& ns,
                                             const std::vector<std::vector<Digest>>& requests,
                                             uint32_t lease_ms);
  Result<kvcache::StoreStats, ClientError> stats();

  // Every call's deadline (default 30 s).
  void set_timeout_ms(uint32_t ms) { timeout_ms_ = ms; }

  // Whether the channel is connected now; asks it to connect when it is idle. The daemon is
  // local, so a channel that lost it retries at most kMaxReconnectBackoffMs apart: a restarted
  // cgn-kvcached is in use again within about a second. An idle channel may still read true for
  // a connection the daemon closed: the next call finds it dead and is sent once more on a new
  // connection (every call is retried once on UNAVAILABLE, within its deadline).
  bool connected() const;
  static constexpr int kMaxReconnectBackoffMs = 1000;

 private:
  KvClient() = default;
  std::shared_ptr<grpc::Channel> channel_;
  uint32_t timeout_ms_ = 30000;
};

}  // namespace cgn::kvcached
