// What the node's cgn-kvcached holds of the prompts this agent served, for kv_offload = "cgn"
// (docs/agent.md "Tiered KV"). The agent tracks the digest chains it published (track), asks
// its kvcached for them every interval in one BatchLookup (no lease: the answer is a hint for
// routing and for the engine, which takes its own lease when it loads), hands the change (newly
// resident digests with their tier, digests no longer resident) to the sink (the etcd publisher),
// and keeps the last answer for the data path (resident_run), which never waits on kvcached.
//
// Namespace (kv_namespace): model = [engine] served model name, dtype "auto", tp_rank 0 of
// tp_size 1, block_tokens = [router.routing] block_bytes / 4, tenant "". The agent's digests
// name block_bytes of canonical prompt text (about block_bytes / 4 tokens); an engine that saves
// blocks under the digests the agent hands it (kv_transfer_params.cgn_prefix_digests) and in this
// namespace is found; one that names its blocks otherwise is not.
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

namespace cgn::agent {

struct KvResidencyOptions {
  kvcache::BlockNamespace ns;
  std::chrono::milliseconds interval{250};  // [agent] publish_interval_ms
  size_t max_digests = 4096;                // [agent] max_published_prefixes: digests tracked at most
  uint32_t timeout_ms = 1000;               // one BatchLookup's deadline
};

// The namespace the agent looks its digests up in (see above).
kvcache::BlockNamespace kv_namespace(const config::EngineConfig& engine, uint32_t block_bytes);

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

  // A prompt's chain (digest 0..n-1) to look up from now on. A chain that extends a tracked one
  // replaces it; past max_digests the oldest chains are dropped.
  void track(std::span<const Digest> chain);
  // The leading run of `chain` the last answer found resident.
  std::vector<Digest> resident_run(std::span<const Digest> chain) const;
  // One lookup round (the refresh thread's body; tests call it directly). False when the daemon
  // did not answer (the last answer stays).
  bool refresh_once();

  uint64_t rounds() const;
  uint64_t failures() const;
  size_t tracked_digests() const;

 private:
  void run();

  KvResidencyOptions options_;
  KvLookupFn lookup_;
  ResidencySink sink_;
  log::Logger log_;
  log::StateChangeLogger changes_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::vector<Digest>> chains_;  // oldest first
  size_t tracked_ = 0;                      // digests in chains_
  std::unordered_map<Digest, routing::Tier, DigestHash> resident_;
  uint64_t rounds_ = 0;
  uint64_t failures_ = 0;
  std::thread thread_;
};

}  // namespace cgn::agent
