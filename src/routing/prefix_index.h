// The prefix index (docs/design/principles.md): which nodes hold which prefix digests.
//
// Layout, chosen for <= 150 bytes per (digest, node) entry and few cache misses per lookup:
//   - an open-addressing table (linear probing, 8-byte slots: 32-bit tag + 32-bit record id),
//   - one 64-byte record per digest (the digest and up to 3 holders inline; more holders spill
//     into a per-record overflow vector, which only hot shared prefixes need),
//   - one 24-byte entry per (digest, node) holding the node's recency links and touch time.
// Records and entries live in chunked slabs (stable ids, no reallocation copies).
// Each node has three recency lists (optimistic, confirmed in the engine, confirmed in a kvcached
// tier); capacity pruning evicts the least recently touched entry of the first two tails (the
// third has its own bound), TTL pruning walks the optimistic tail.
//
// Thread-safety: none. One owner (the RoutingCore, on one strand) calls everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/clock.h"
#include "core/digest_types.h"
#include "core/routing_defaults.h"
#include "routing/types.h"

namespace cgn::routing {

struct IndexConfig {
  // Optimistic entries not confirmed within this time are dropped (Dynamo's approximate mode
  // uses 120 s).
  Nanos optimistic_ttl = static_cast<Nanos>(routing_defaults::kIndexTtlS) * kNanosPerSecond;
  // Expired optimistic entries are removed by a sweep at most this often; a lookup may see an
  // entry up to this long after its expiry.
  Nanos sweep_interval = 250 * kNanosPerMilli;
  // Per-node capacity in digest blocks when the node's total_blocks is unknown (0). It bounds
  // what the engine holds (optimistic and engine-tier entries): a node's cgn-kvcached tiers hold
  // more than its HBM, so their entries have their own bound, max_tier_entries.
  uint32_t default_node_capacity = 16384;
  // Per-node cap on entries confirmed in a kvcached tier (RAM, SSD): the agents' cap on
  // published keys (cluster::kMaxPublishedPrefixes); over it the least recently touched go.
  uint32_t max_tier_entries = 4096;
  // Cap on (digest, node) entries over all nodes; over it, the node holding the most entries
  // loses its least recently touched one. 0: no cap beyond the per-node capacities, so the index
  // is sized from the engines' capacity (the sum of every node's digest capacity).
  uint64_t max_entries = routing_defaults::kIndexMaxEntries;
  // Mixed into the table hash (not into the digests) so crafted prompts cannot aim many
  // digests at one probe chain. Decisions never depend on it.
  uint64_t hash_seed = 0x6367'6e5f'7072'6678ull;
};

// Credit per held block, by tier and state (docs/design/principles.md: engine 1.0, RAM 0.75, SSD 0.25).
struct TierCredit {
  float engine = 1.0F;
  float ram = routing_defaults::kRamTierCredit;
  float ssd = routing_defaults::kSsdTierCredit;
  // Multiplies the credit of an optimistic (unconfirmed) entry.
  float optimistic = 1.0F;
  bool operator==(const TierCredit&) const = default;

  float of(Tier t, EntryState s) const {
    const float base = t == Tier::kEngine ? engine : (t == Tier::kRam ? ram : ssd);
    return s == EntryState::kConfirmed ? base : base * optimistic;
  }
};

// Per-request overlap result, reused across lookups so the hot path does not allocate.
// After match(): for every node n in touched(), run(n) is the number of leading request
// digests n holds, credit(n) their credited sum and guessed(n) how many of them are optimistic
// (not confirmed by the node); every other node has 0.
class OverlapScratch {
 public:
  uint32_t run(NodeIndex n) const { return n < run_.size() ? run_[n] : 0; }
  float credit(NodeIndex n) const { return n < credit_.size() ? credit_[n] : 0.0F; }
  uint32_t guessed(NodeIndex n) const { return n < guessed_.size() ? guessed_[n] : 0; }
  const std::vector<NodeIndex>& touched() const { return touched_; }

 private:
  friend class PrefixIndex;
  void reset(size_t nodes);
  std::vector<uint32_t> run_;
  std::vector<float> credit_;
  std::vector<uint32_t> guessed_;
  std::vector<NodeIndex> touched_;
};

class PrefixIndex {
 public:
  explicit PrefixIndex(IndexConfig config = {});
  ~PrefixIndex();
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  const IndexConfig& config() const { return config_; }
  // Takes effect at once for capacity defaults; a new TTL applies at the next sweep.
  void set_config(const IndexConfig& config);

  // Capacity in digest blocks (0 = config().default_node_capacity). Prunes the node's least
  // recently touched entries when it now holds more.
  void set_node_capacity(NodeIndex node, uint32_t capacity);
  uint32_t node_capacity(NodeIndex node) const;

  // Records that `node` was sent these digests (after a dispatch). New (digest, node) pairs
  // become optimistic entries; existing ones are touched (a confirmed entry stays confirmed).
  void record_optimistic(NodeIndex node, std::span<const Digest> digests, Nanos now);
  // Live KV prefixes from the node itself: inserts or upgrades to confirmed, at this tier.
  void confirm(NodeIndex node, std::span<const Digest> digests, Tier tier, Nanos now);
  // The node no longer holds these digests (confirmed or not).
  void remove(NodeIndex node, std::span<const Digest> digests);
  // Drops everything the node holds (node removed, kv_epoch changed). Returns entries dropped.
  size_t clear_node(NodeIndex node);

  // Removes optimistic entries touched more than optimistic_ttl ago. Returns entries dropped.
  size_t sweep_expired(Nanos now);
  // sweep_expired() if sweep_interval has passed since the last sweep.
  void maybe_sweep(Nanos now);

  // Leading-run overlap of every node for this request (see OverlapScratch). Stops as soon as
  // no node still has an unbroken run. `node_limit` bounds node numbers seen (scratch size).
  void match(std::span<const Digest> digests, const TierCredit& credit, size_t node_limit,
             OverlapScratch& out) const;

  // Introspection (tests, metrics: cgn_router_prefix_index_entries).
  size_t entries() const { return live_entries_; }
  size_t digests() const { return live_records_; }
  size_t node_entries(NodeIndex node) const;
  bool holds(NodeIndex node, const Digest& d) const;
  // The state of (node, d), or false if absent.
  bool state_of(NodeIndex node, const Digest& d, EntryState* state, Tier* tier) const;

 private:
  struct Impl;
  IndexConfig config_;
  std::unique_ptr<Impl> impl_;
  size_t live_entries_ = 0;
  size_t live_records_ = 0;
  Nanos next_sweep_ = 0;

  void enforce_max_entries();
};

// The documented capacity rule (docs/architecture/routing.md): the number of digest blocks a
// node's KV pool can hold. 0 total_blocks (unknown) returns 0 (the caller uses its default).
uint32_t digest_capacity(uint64_t total_blocks, uint32_t engine_block_size_tokens, double bytes_per_token,
                         uint32_t block_bytes);

}  // namespace cgn::routing
