// What the node's cgn-kvcached holds of the prompts this agent served, for kv_offload = "cgn"
// (docs/agent.md "Tiered KV"). The agent tracks each prompt's routing chain beside its chain in
// the engine's block naming (agent/engine_digests.h) (track), asks
// its kvcached for them every interval in BatchLookups of at most kvcached::kMaxLookupRequests
// requests, one request per block (no lease: the answer is a
// hint for routing and for the engine, which takes its own lease when it loads), hands the change (newly
// resident digests with their tier, digests no longer resident) to the sink (the etcd publisher),
// and keeps the last answer for the data path (resident_run), which never waits on kvcached.
//
// Routing digest j (bytes j*block_bytes .. (j+1)*block_bytes-1 of the prompt) is resident when
// every engine block covering those bytes is, at block_tokens * 4 bytes a block (the
// 4-bytes-a-token rule of the capacity and KV-event rules, cluster::kBytesPerToken), at the
// coldest of their tiers; with routing digests as the engine's (block_tokens = block_bytes / 4)
// that is one for one.
//
// Threads: one refresh thread (start/stop, from the owner's thread). track() and
// resident_run() are safe from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/digest_types.h"
#include "core/log.h"
#include "kvcache/block_key.h"
#include "kvcached/kv_client.h"
#include "routing/types.h"

namespace cgn::metrics {
class Registry;
}

namespace cgn::agent {

struct KvResidencyOptions {
  kvcache::BlockNamespace ns;               // the engine's (engine_naming)
  uint32_t block_bytes = 256;               // [router.routing] block_bytes: the routing digests' block
  std::chrono::milliseconds interval{250};  // [agent] publish_interval_ms
  size_t max_digests = 4096;                // [agent] max_published_prefixes: digests tracked at most
  uint32_t timeout_ms = 1000;               // one BatchLookup's deadline
};

routing::Tier to_routing_tier(kvcache::Tier t);

// What one lookup round changed.
struct ResidencyChange {
  std::vector<std::pair<Digest, routing::Tier>> resident;  // newly resident, or in another tier now
  std::vector<Digest> gone;                                // resident at the last round, not now
  bool empty() const { return resident.empty() && gone.empty(); }
};

// The seam to the daemon: KvClient::batch_lookup in production.
using KvLookupFn = std::function<Result<kvcached::KvLookup, kvcached::ClientError>(
    const kvcache::BlockNamespace&, const std::vector<std::vector<Digest>>&, uint32_t lease_ms)>;
using ResidencySink = std::function<void(const ResidencyChange&)>;

class KvResidency {
 public:
  // sink may be empty (the state backend publishes no tiers): the answers still serve
  // resident_run().
  KvResidency(KvResidencyOptions options, KvLookupFn lookup, ResidencySink sink);
  ~KvResidency();  // stop()
  KvResidency(const KvResidency&) = delete;
  KvResidency& operator=(const KvResidency&) = delete;

  void start();
  void stop();

  // A prompt's routing chain and its chain in the engine's naming, looked up from now on. One
  // that extends a tracked one replaces it; past max_digests the oldest are dropped.
  void track(std::span<const Digest> routing, std::span<const Digest> engine);
  // The digests of `chain` (engine naming) the last answer found resident, in chain order.
  std::vector<Digest> resident_run(std::span<const Digest> chain) const;
  // One lookup round (the refresh thread's body; tests call it directly). False when the daemon
  // did not answer (the last answer stays).
  bool refresh_once();

  uint64_t rounds() const;    // lookup rounds answered
  uint64_t failures() const;  // lookup rounds the daemon did not answer
  size_t tracked_digests() const;
  // Routing digests the last answer found resident, by tier.
  struct Published {
    size_t ram = 0;
    size_t ssd = 0;
  };
  Published published() const;

 private:
  void run();
  Result<kvcached::KvLookup, kvcached::ClientError> lookup_in_batches(
      const std::vector<std::vector<Digest>>& requests) const;

  KvResidencyOptions options_;
  KvLookupFn lookup_;
  ResidencySink sink_;
  log::Logger log_;
  log::StateChangeLogger changes_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  struct Tracked {
    std::vector<Digest> routing;
    std::vector<Digest> engine;
  };
  // The routing digests a resident run stands for (see above).
  // blocks[b]: where kvcached holds engine block b (nullopt: not there).
  void map_run(const Tracked& t, std::span<const std::optional<routing::Tier>> blocks,
               std::unordered_map<Digest, routing::Tier, DigestHash>& out) const;

  std::deque<Tracked> chains_;                                       // oldest first
  size_t tracked_ = 0;                                               // engine digests in chains_
  std::unordered_map<Digest, routing::Tier, DigestHash> resident_;   // engine naming
  std::unordered_map<Digest, routing::Tier, DigestHash> published_;  // routing digests
  uint64_t rounds_ = 0;
  uint64_t failures_ = 0;
  std::thread thread_;
};

// cgn_agent_kv_residency_* on the agent's /metrics, read from `r` at each scrape (r outlives reg's
// scrapes): lookup rounds by outcome, digests tracked, digests published by tier.
void add_kv_residency_metrics(metrics::Registry& reg, const KvResidency& r);

}  // namespace cgn::agent
