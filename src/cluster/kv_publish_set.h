// The agent's set of live KV prefixes (docs/design/principles.md): the digests it tells the router its engine
// holds, as an LRU bounded by the engine's capacity and a key cap, and the diff against what etcd
// already has, so each flush writes only changes. Pure: no etcd, no clock. A backend that
// carries prefixes owns one under its publisher's mutex (etcd: state/etcd/etcd_publisher.h).
//
// Thread safety: none; one owner (callers lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/digest_types.h"
#include "core/result.h"
#include "routing/types.h"

namespace cgn::cluster {

// The hard cap on live KV prefix keys per node (docs/design/principles.md, node record and state backends).
inline constexpr size_t kMaxPublishedPrefixes = 4096;
// Bytes of canonical prompt per token assumed when converting engine blocks to digest blocks.
inline constexpr uint64_t kBytesPerToken = 4;

// The value of a live-prefix key (docs/architecture/etcd.md): "<kv_epoch>" for a prefix the
// engine holds (the value agents always wrote), {"epoch":<kv_epoch>,"tier":"ram"} (or "ssd") for
// one only the node's cgn-kvcached holds.
std::string kv_prefix_value(uint64_t epoch, routing::Tier tier);
struct KvPrefixValue {
  std::optional<uint64_t> epoch;  // none: a value that names no epoch (neither a number nor JSON)
  routing::Tier tier = routing::Tier::kEngine;
  bool operator==(const KvPrefixValue&) const = default;
};
// A number: that epoch, engine tier. A JSON object: "epoch" (a non-negative integer) and "tier"
// ("engine", "ram" or "ssd"), both required; anything else in it is an error naming the field.
// Any other text: no epoch, engine tier (the router then dates the key by its revision).
enum class KvValueError : uint8_t { kInvalid };
Result<KvPrefixValue, KvValueError> parse_kv_prefix_value(std::string_view value);

// How many digests the engine can hold at most, by the documented rule (docs/agent.md):
//   total_blocks * engine_block_tokens * kBytesPerToken / block_bytes, bounded by `cap`.
// Unknown pool (total_blocks or engine_block_tokens 0) gives `cap`; block_bytes 0 gives `cap`.
size_t publish_capacity(uint64_t total_blocks, uint32_t engine_block_tokens, uint32_t block_bytes,
                        size_t cap = kMaxPublishedPrefixes);

// How many digests n evicted engine blocks stand for, by the same rule (docs/agent.md "KV
// events"): ceil(n * engine_block_tokens * kBytesPerToken / block_bytes), at least 1 for n > 0.
// Unknown engine block size or block_bytes 0: n (one digest per block, the conservative side).
size_t digests_for_engine_blocks(uint64_t n, uint32_t engine_block_tokens, uint32_t block_bytes);

// KV pressure: the engine reported free blocks below `threshold` (5%) of a known pool.
bool under_kv_pressure(uint64_t total_blocks, std::optional<uint64_t> free_blocks, double threshold = 0.05);

// What one batch of the engine's KV events asks of the published set (agent/kv_events.h
// plan_withdrawal; docs/agent.md "KV events"): withdraw everything (AllBlocksCleared), then
// withdraw the oldest digests standing for removed_blocks engine blocks (the BlockRemoved events
// after the last clear).
struct KvWithdrawal {
  bool all = false;
  uint64_t removed_blocks = 0;
  uint32_t block_size = 0;  // engine tokens per block seen in the batch's BlockStored (0: unknown)
  bool empty() const { return !all && removed_blocks == 0; }
};

// What a publisher's withdrawals did, for the agent's /metrics.
struct WithdrawalStats {
  uint64_t clears = 0;       // AllBlocksCleared / sequence gaps: every prefix withdrawn
  uint64_t withdrawals = 0;  // BlockRemoved batches that withdrew oldest digests
  uint64_t withdrawn = 0;    // digests those withdrew
};

// What one flush must write.
struct PrefixChanges {
  // Delete every key of this node first (the kv_epoch changed: nothing published before holds).
  bool clear_all = false;
  std::vector<Digest> puts;  // new since the last flush, oldest-used first
  // Parallel to puts (filled by take_changes; empty or short: engine): where the node holds
  // each, for the key's value (kv_prefix_value).
  std::vector<routing::Tier> put_tiers;
  std::vector<Digest> deletes;  // published before, evicted since
  bool empty() const { return !clear_all && puts.empty() && deletes.empty(); }
  size_t ops() const { return (clear_all ? 1 : 0) + puts.size() + deletes.size(); }
};

class PublishedSet {
 public:
  // `cap`: the key cap, every entry (engine and tiers) counted; the engine's bound starts at it.
  explicit PublishedSet(size_t cap = kMaxPublishedPrefixes) : cap_(cap), capacity_(cap) {}

  // Marks a prefix chain (digest 0 .. n-1 of one request) as used now (the engine holds it).
  // Deeper digests are treated as older than shallower ones (inserted from the tail), so
  // eviction takes the tails of chains first and keeps the shared roots, as the engines' own
  // LRUs do. Past capacity() the oldest engine entries leave the engine (see set_residency);
  // past the key cap the oldest tier entries go.
  void touch(std::span<const Digest> chain);
  // The node's cgn-kvcached answered (docs/agent.md "Tiered KV"): `resident` digests are held
  // in that tier, `gone` ones no longer; the set remembers the answer. A digest the engine holds
  // (touched, not withdrawn) stays the engine's; one that leaves the engine (capacity, pruning)
  // while kvcached holds it stays published at its tier. Tier entries do not count against
  // capacity() (the engine's pool), only against the key cap, which they never take from
  // engine entries (a new tier digest enters only below it; the oldest tier entries make room
  // for the engine's). A tier change re-puts the key. Returns the entries added, changed or
  // removed.
  size_t set_residency(std::span<const std::pair<Digest, routing::Tier>> resident,
                       std::span<const Digest> gone);
  // Where the set says the node holds `d` (nullopt: not in the set).
  std::optional<routing::Tier> tier_of(const Digest& d) const;
  // Shrinks (the oldest leave the engine first) or grows the engine's bound, at most the key cap.
  void set_capacity(size_t capacity);
  size_t capacity() const { return capacity_; }
  // The n oldest engine entries leave the engine (the engine evicted them); returns how many.
  size_t prune_oldest(size_t n);
  // kv_epoch changed: forget what the engine held; the next flush deletes the node's whole KV
  // prefix and puts what kvcached holds again.
  void clear();

  // The changes since the last take_changes() (or since mark_unpublished()); afterwards every
  // entry counts as published.
  PrefixChanges take_changes();
  // Puts the changes of a failed flush back, so the next one retries them (no loss, no
  // duplicate deletes of keys re-touched meanwhile).
  void restore_changes(const PrefixChanges& failed);
  // Reconcile after a new lease (etcd lost our keys or we cannot know): every entry becomes
  // unpublished and pending deletes are dropped; the caller diffs etcd's keys itself.
  void mark_unpublished();

  size_t size() const { return map_.size(); }  // engine and tier entries
  bool contains(const Digest& d) const { return map_.contains(d); }
  // Entries: the engine's, most recently used first, then the tiers', newest first.
  std::vector<Digest> entries() const;
  size_t pending_deletes() const { return pending_deletes_.size(); }
  bool clear_pending() const { return clear_all_; }

 private:
  struct Entry {
    Digest digest;
    bool published = false;
    routing::Tier tier = routing::Tier::kEngine;
  };
  using List = std::list<Entry>;
  void evict(List::iterator it);
  void leave_engine(List::iterator it);  // it: an engine entry
  bool add_tier_entry(const Digest& d, routing::Tier tier);
  void enforce_bounds();

  size_t cap_;       // every entry
  size_t capacity_;  // engine entries
  List engine_;      // the engine's entries, front: most recently used
  List tiers_;       // kvcached's entries, front: newest
  std::unordered_map<Digest, List::iterator, DigestHash> map_;
  // The last residency answer (set_residency), engine entries' included.
  std::unordered_map<Digest, routing::Tier, DigestHash> residency_;
  // Evicted while published, with the tier their key's value names.
  std::unordered_map<Digest, routing::Tier, DigestHash> pending_deletes_;
  bool clear_all_ = false;
};

}  // namespace cgn::cluster
