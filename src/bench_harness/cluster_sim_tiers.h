// The cluster simulator's KV offload tier (sim::OffloadTier) for one node: real
// kvcache::BlockStore instances driven in virtual time (the run's ManualClock), keyed by the
// engine's block hashes through kvcache::KeyDeriver, as cgn-kvcached keys them.
//
// Two RAM-only stores: the RAM tier (exact LRU over ram_blocks) and a second store standing in
// for the SSD tier (LRU over ssd_blocks). A real SSD tier spills in a background thread on wall
// time, which would make runs depend on the machine; so puts go to both stores (write-through),
// and a lookup answers RAM for the blocks of the run the RAM store holds and SSD for the rest of
// the run the SSD store holds. Blocks carry a few synthetic bytes (the key), one 4 KiB arena page
// each: the tiers are sized in blocks, the bytes they model are blocks x the engine's block bytes.
//
// Thread safety: one owner (the run's loop); the stores are thread-safe anyway.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "kvcache/block_key.h"
#include "kvcache/block_store.h"
#include "sim/offload_tier.h"

namespace cgn::bench {

enum class TierError : uint8_t { kOpen };

struct TierConfig {
  uint32_t ram_blocks = 0;  // 0: no offload tiers
  uint32_t ssd_blocks = 0;  // 0: RAM tier only
  bool enabled() const { return ram_blocks > 0; }
};

class StoreTier final : public sim::OffloadTier {
 public:
  // Errors name what failed (a bad namespace, a store that would not open).
  static Result<std::unique_ptr<StoreTier>, TierError> open(const TierConfig& cfg,
                                                            const kvcache::BlockNamespace& ns,
                                                            const Clock& clock);
  ~StoreTier() override;

  void put(std::span<const sim::BlockHash> hashes, uint64_t block_bytes) override;
  void lookup(std::span<const sim::BlockHash> hashes, Nanos lease,
              std::vector<sim::OffloadTierKind>& out) override;

  // The tier of each block of the resident run, without a lease (the router's residency view).
  void resident(std::span<const sim::BlockHash> hashes, std::vector<sim::OffloadTierKind>& out);
  uint64_t puts() const { return puts_; }

 private:
  StoreTier(kvcache::KeyDeriver keys, std::unique_ptr<kvcache::BlockStore> ram,
            std::unique_ptr<kvcache::BlockStore> ssd);
  void keys_of(std::span<const sim::BlockHash> hashes);

  kvcache::KeyDeriver keys_;
  std::unique_ptr<kvcache::BlockStore> ram_;
  std::unique_ptr<kvcache::BlockStore> ssd_;  // null: RAM only
  std::vector<kvcache::BlockKey> scratch_;
  uint64_t puts_ = 0;
};

}  // namespace cgn::bench
