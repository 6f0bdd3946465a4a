// The simulated GPU KV-cache: a pool of fixed-size blocks with vLLM V1's
// prefix-caching semantics (vllm/v1/core/block_pool.py, kv_cache_utils.py).
//
// - A full block is identified by a chained hash of (parent block hash, the
//   block's token ids); the first block chains from a fixed seed, so two
//   simulator instances agree on hashes (vLLM's NONE_HASH with a fixed
//   PYTHONHASHSEED). 64-bit hashes: a collision is ~2^-64 per pair.
// - Blocks have reference counts. A block with no references sits in the
//   free queue, still holding its hash, and can be reused by a later request
//   that shares the prefix (a "touch" takes it off the queue).
// - Allocation pops the front of the free queue: least recently freed first.
//   A popped block that still holds a hash is evicted from the prefix cache.
//   Referenced blocks (running requests, P/D handoffs) are never evicted.
// - Requests free their blocks in reverse order, so a prefix's tail is
//   evicted before its head (vLLM does the same).
// - Usage is 1 - free/total, where free includes cached unreferenced blocks
//   (vLLM's get_usage()).
//
// - Optionally (set_record_events) the pool records what vLLM's KV events
//   report (vllm/v1/core/block_pool.py): BlockStored when full blocks enter
//   the prefix cache, BlockRemoved when a cached hash is dropped (LRU reuse
//   or admin eviction), AllBlocksCleared when a reset leaves no cached block.
//   The engine hands them out once the step that recorded them has completed
//   (Engine::take_kv_events) and the shell publishes them (kv_events.h).
//
// Thread safety: none; owned by one Engine.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/tokenizer.h"

namespace cgn::sim {

using BlockId = uint32_t;
using BlockHash = uint64_t;
inline constexpr BlockId kNoBlock = std::numeric_limits<BlockId>::max();
inline constexpr BlockHash kBlockHashSeed = 0x4e4f4e455f484153ULL;  // "NONE_HAS"

// Hash of one full block chained on its parent (kBlockHashSeed for the first).
BlockHash hash_block(BlockHash parent, std::span<const TokenId> block_tokens);

// Appends the chained hashes of every full block of tokens that is not yet in
// hashes (hashes holds the first hashes.size() blocks already).
void extend_block_hashes(std::span<const TokenId> tokens, uint32_t block_size,
                         std::vector<BlockHash>& hashes);

// One KV cache event, as vLLM publishes it (before encoding). Consecutive
// stores of one chain, and consecutive removals, are merged into one event.
struct KvCacheEvent {
  enum class Kind : uint8_t { kStored, kRemoved, kAllCleared };
  Kind kind = Kind::kStored;
  std::vector<BlockHash> hashes;  // stored or removed, in order
  bool has_parent = false;        // stored: the chain continues a cached block
  BlockHash parent = 0;
  std::vector<TokenId> tokens;  // stored: the blocks' tokens, block_size each
  uint32_t block_size = 0;      // stored
};

// Removals are merged into one event up to this many hashes (vLLM sends one per block).
inline constexpr size_t kMaxHashesPerEvent = 512;

struct KvCacheCounters {
  uint64_t evictions = 0;      // cached blocks whose hash was dropped to reuse the block
  uint64_t blocks_cached = 0;  // full blocks registered in the prefix cache
};

class BlockPool {
 public:
  explicit BlockPool(uint32_t num_blocks);

  uint32_t num_blocks() const { return static_cast<uint32_t>(blocks_.size()); }
  uint32_t num_free() const { return num_free_; }
  uint32_t num_used() const { return num_blocks() - num_free_; }
  // Blocks holding a prefix-cache entry (referenced or not).
  size_t num_cached() const { return cached_.size(); }
  double usage() const {
    return blocks_.empty() ? 0.0 : static_cast<double>(num_used()) / static_cast<double>(blocks_.size());
  }

  // Number of leading hashes whose blocks are cached (no side effects).
  uint32_t count_cached_prefix(std::span<const BlockHash> hashes) const;

  // Takes a reference on the cached blocks of the leading cached hashes, at
  // most max_blocks of them; appends their ids to out and returns how many.
  uint32_t acquire_cached_prefix(std::span<const BlockHash> hashes, uint32_t max_blocks,
                                 std::vector<BlockId>& out);

  // Allocates n fresh blocks (ref 1), evicting LRU cached free blocks as
  // needed. Returns false and changes nothing when fewer than n are free.
  bool allocate(uint32_t n, std::vector<BlockId>& out);

  // Registers a now-full block under hash. If another block already holds
  // that hash, this block stays unregistered (the first copy wins). parent and
  // tokens only feed the BlockStored event (when events are recorded).
  void cache_block(BlockId id, BlockHash hash, const BlockHash* parent = nullptr,
                   std::span<const TokenId> tokens = {}, uint32_t block_size = 0);

  // Drops one reference from each block, last block first; blocks reaching 0
  // join the tail of the free queue.
  void release(std::span<const BlockId> ids);

  // Drops every unreferenced block's hash. Returns the number evicted. Records
  // AllBlocksCleared when no cached block is left (else BlockRemoved of those dropped).
  size_t evict_all();
  // Drops the hashes of the unreferenced blocks among the given chain.
  size_t evict_hashes(std::span<const BlockHash> hashes);

  bool is_cached(BlockHash h) const { return cached_.count(h) != 0; }
  uint32_t ref_count(BlockId id) const { return blocks_[id].ref; }
  const KvCacheCounters& counters() const { return counters_; }

  // Hashes dropped by LRU reuse (allocate) are appended to *sink when set, oldest first (the
  // engine hands them to its offload tier). nullptr: not kept.
  void set_evicted_sink(std::vector<BlockHash>* sink) { evicted_sink_ = sink; }

  // KV events: off by default (no cost). take_events moves the recorded ones onto out.
  void set_record_events(bool on) { record_events_ = on; }
  bool records_events() const { return record_events_; }
  void take_events(std::vector<KvCacheEvent>& out);

 private:
  struct Block {
    BlockHash hash = 0;
    bool has_hash = false;
    uint32_t ref = 0;
    BlockId prev = kNoBlock;  // free-queue links, valid when ref == 0
    BlockId next = kNoBlock;
  };

  void queue_push_back(BlockId id);
  void queue_remove(BlockId id);
  void drop_hash(BlockId id);
  void record_removed(BlockHash h);

  std::vector<Block> blocks_;
  std::unordered_map<BlockHash, BlockId> cached_;
  BlockId head_ = kNoBlock;
  BlockId tail_ = kNoBlock;
  uint32_t num_free_ = 0;
  KvCacheCounters counters_;
  bool record_events_ = false;
  std::vector<KvCacheEvent> events_;
  std::vector<BlockHash>* evicted_sink_ = nullptr;
};

}  // namespace cgn::sim
