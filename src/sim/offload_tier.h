// The seam between the simulated engine and a KV offload tier below its HBM (cgn-kvcached's
// RAM and SSD tiers). The engine puts the blocks its KV cache evicts and, on a prefix miss
// beyond its HBM hit, asks for the resident run of the rest of the prompt, leased so the run
// stays readable while it loads. Loading costs what NodeModel::tier_load_time says
// (docs/sim.md, "KV offload tiers").
//
// Two implementations: the engine-sim shell's live client of a cgn-kvcached
// (src/sim/shell/kvcached_tier.h) and the cluster simulator's in-process store
// (src/bench_harness/cluster_sim_tiers.h).
//
// Keys are the engine's chained block hashes (kv_cache.h); an implementation maps them onto its
// store's keys (block_digest() below, then kvcache::KeyDeriver).
//
// Thread safety: the engine calls from its one owner; implementations say what they allow.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/clock.h"
#include "core/digest_types.h"
#include "sim/kv_cache.h"

namespace cgn::sim {

enum class OffloadTierKind : uint8_t { kRam = 0, kSsd = 1 };

class OffloadTier {
 public:
  virtual ~OffloadTier() = default;
  // Blocks that left the engine's HBM, each block_bytes long (the modelled KV size).
  virtual void put(std::span<const BlockHash> hashes, uint64_t block_bytes) = 0;
  // Appends to out the tier of each block of the unbroken resident run from hashes[0], and
  // leases that run for `lease`. A tier that cannot answer appends nothing (the engine
  // recomputes).
  virtual void lookup(std::span<const BlockHash> hashes, Nanos lease, std::vector<OffloadTierKind>& out) = 0;
  // Whether the tier can answer now; nullopt for a tier that cannot tell (always in process).
  virtual std::optional<bool> reachable() { return std::nullopt; }
  // Puts off the request path: blocks waiting (in flight included), and blocks dropped (the
  // queue full) or not stored (the tier refused or did not answer) so far. nullopt for a tier
  // that stores in process.
  struct PutStats {
    uint64_t waiting = 0;
    uint64_t dropped = 0;
    uint64_t failed = 0;
  };
  virtual std::optional<PutStats> put_stats() { return std::nullopt; }
};

// The 32-byte digest a store keys a block by: the block's 64-bit chained hash, little-endian,
// in the first 8 bytes, the rest zero. The chain already commits to every earlier token, and
// KeyDeriver hashes it with the namespace, so the key stays uniformly distributed.
inline Digest block_digest(BlockHash h) {
  Digest d{};
  for (size_t i = 0; i < 8; ++i) {
    d[i] = static_cast<uint8_t>(h >> (8 * i));
  }
  return d;
}

}  // namespace cgn::sim
