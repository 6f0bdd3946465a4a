// The node-local tiered KV block store behind cgn-kvcached: a RAM tier (one bounded arena, a
// memfd the local fast path maps into the engine's process) over an optional SSD tier
// (ssd_tier.h). Blocks are opaque bytes under a BlockKey (block_key.h).
//
// - Puts are two-phase: put_start reserves arena space and returns a handle to write into;
//   put_end makes the block visible. No reader ever sees a half-written block; a handle dropped
//   without put_end frees its space.
// - lookup() answers the unbroken run of resident keys from the first, with the tier of each,
//   and leases those blocks for a few seconds: a leased block is neither spilled nor evicted, so
//   a get() after a successful lookup finds it (the lookup-then-read race that gives garbled KV
//   in other stores).
// - get() pins a RAM block for as long as its ReadHandle lives (the bytes are read in place, no
//   copy); an SSD block is read into the handle's own buffer and verified, or, with
//   pin_in_ram, promoted into the arena and pinned (the local fast path hands out arena offsets).
// - RAM use above high_watermark starts a background round that spills the least recently used
//   unpinned, unleased blocks (spill_fraction of the arena) to SSD and frees them. A put that
//   finds the arena full evicts least recently used blocks at once: spilled to SSD first when the
//   SSD tier is on, dropped when it is off. So with no SSD tier the RAM tier is an exact LRU over
//   its capacity, and with an SSD tier of enough size no complete block is lost.
// - put of a key that is already resident refreshes its recency and writes nothing. get() hits
//   also refresh; lookup() does not.
//
// Threads: open() starts a maintenance thread (spill rounds, SSD TTL and size, lease expiry)
// and the SSD tier's scan; stop() (and the destructor) joins them. Every method is thread-safe;
// the bytes of puts and gets are copied outside the store's lock.
//
// Handles point into the store: they may outlive stop() (a pinned block stays readable, a
// PutHandle can still be dropped), but every handle must be released before the store is
// destroyed (asserted in debug builds). src/kvcache/README.md describes the design.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "kvcache/block_key.h"
#include "kvcache/store_types.h"

namespace cgn::kvcache {

class BlockStore;

// A reserved, not yet visible block. Move-only; destroying it without put_end frees the space.
class PutHandle {
 public:
  PutHandle() = default;
  PutHandle(PutHandle&& other) noexcept;
  PutHandle& operator=(PutHandle&& other) noexcept;
  ~PutHandle();

  std::span<uint8_t> data() const { return data_; }
  uint64_t arena_offset() const { return offset_; }
  const BlockKey& key() const { return key_; }
  bool valid() const { return store_ != nullptr; }

 private:
  friend class BlockStore;
  BlockStore* store_ = nullptr;
  BlockKey key_{};
  uint32_t slot_ = 0;
  uint64_t offset_ = 0;
  std::span<uint8_t> data_;
};

// A readable block. Move-only; a RAM block stays pinned (not spilled, not evicted) while it lives.
class ReadHandle {
 public:
  ReadHandle() = default;
  ReadHandle(ReadHandle&& other) noexcept;
  ReadHandle& operator=(ReadHandle&& other) noexcept;
  ~ReadHandle();

  std::span<const uint8_t> data() const { return data_; }
  Tier tier() const { return tier_; }  // where the block was found
  // The block's offset in the arena when it is pinned there (RAM hits and promoted blocks).
  std::optional<uint64_t> arena_offset() const { return offset_; }

 private:
  friend class BlockStore;
  BlockStore* store_ = nullptr;
  uint32_t slot_ = 0;  // pinned arena slot, when offset_ is set
  Tier tier_ = Tier::kNone;
  std::optional<uint64_t> offset_;
  std::vector<uint8_t> owned_;  // SSD reads without pin_in_ram
  std::span<const uint8_t> data_;
};

struct LookupResult {
  std::vector<Tier> tiers;  // one per key of the unbroken resident run from the first key
  Nanos lease_until = 0;    // on the store's clock; 0 when nothing was leased
};

class BlockStore {
 public:
  static Result<std::unique_ptr<BlockStore>, StoreError> open(const StoreConfig& cfg, const Clock& clock);
  ~BlockStore();
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  // nullopt: the key is already resident (its recency was refreshed). kTooLarge, kNoSpace,
  // kBusy (another put of the key is open), kStopped.
  Result<std::optional<PutHandle>, StoreError> put_start(const BlockKey& key, uint64_t length);
  Status<StoreError> put_end(PutHandle&& handle);
  // put_start, copy, put_end. Ok when the key was already resident.
  Status<StoreError> put(const BlockKey& key, std::span<const uint8_t> value);

  // `lease` 0: no lease (the run is only reported); else cut to max_lease.
  LookupResult lookup(std::span<const BlockKey> keys, Nanos lease);

  Result<ReadHandle, StoreError> get(const BlockKey& key, bool pin_in_ram = false);

  StoreStats stats() const;

  // The arena, for the local fast path: a memfd of arena_bytes() bytes; offsets from the handles
  // above index into it.
  int arena_fd() const;
  uint64_t arena_bytes() const;

  // Stops the maintenance thread and the SSD scan; later calls fail with kStopped. Idempotent.
  void stop();

  class Impl;

 private:
  friend class PutHandle;
  friend class ReadHandle;
  explicit BlockStore(std::unique_ptr<Impl> impl);
  void abort_put(uint32_t slot);
  void unpin(uint32_t slot);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgn::kvcache
