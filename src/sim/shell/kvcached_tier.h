// The engine-sim shell's KV offload tier (sim/offload_tier.h): a live cgn-kvcached over gRPC
// (a KvcachedLink, kvcached_link.h: kvcached::KvClient in a module loaded for this tier only). Evicted blocks
// are put off the request path by one background thread from a bounded queue (full: the oldest waiting put is
// dropped and counted, as an engine drops offloads it cannot keep up with); each block carries a few
// synthetic bytes derived from its digest. Lookups are BatchLookup with the engine's lease, on the engine's
// thread, with a short deadline: a daemon that is down or slow answers nothing and the engine recomputes (one
// warning per outage in the log, no error to the client).
//
// Namespace: the served model name, dtype bf16, the engine's block size and TP size; the daemon
// derives each block's key from it and the block's digest (kvcache::KeyDeriver).
//
// Thread safety: put and lookup from the engine's one thread; the sender is internal.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvcache/block_key.h"
#include "sim/offload_tier.h"
#include "sim/shell/kvcached_link.h"

namespace cgn::sim {

inline constexpr size_t kKvcachedPutQueue = 4096;          // blocks waiting to be put
inline constexpr uint32_t kKvcachedLookupTimeoutMs = 200;  // a lookup slower than this recomputes

class KvcachedTier final : public OffloadTier {
 public:
  KvcachedTier(std::unique_ptr<KvcachedLink> client, kvcache::BlockNamespace ns);
  ~KvcachedTier() override;  // stops the sender (waiting puts are dropped)
  KvcachedTier(const KvcachedTier&) = delete;
  KvcachedTier& operator=(const KvcachedTier&) = delete;

  void put(std::span<const BlockHash> hashes, uint64_t block_bytes) override;
  void lookup(std::span<const BlockHash> hashes, Nanos lease, std::vector<OffloadTierKind>& out) override;
  std::optional<bool> reachable() override { return client_->connected(); }
  std::optional<PutStats> put_stats() override;

 private:
  void send_loop();
  void note_failure(const std::string& what, const std::string& message);

  std::unique_ptr<KvcachedLink> client_;
  kvcache::BlockNamespace ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<BlockHash> queue_;
  bool stop_ = false;
  bool down_ = false;     // guarded by mu_: one warning per outage
  bool sending_ = false;  // a put is in flight
  uint64_t dropped_ = 0;
  uint64_t failed_ = 0;
  std::thread sender_;
};

}  // namespace cgn::sim
