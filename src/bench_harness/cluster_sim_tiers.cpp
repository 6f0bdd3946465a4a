#include "bench_harness/cluster_sim_tiers.h"

#include <span>
#include <utility>

namespace cgn::bench {
namespace {

constexpr uint32_t kPageBytes = 4096;

Result<std::unique_ptr<kvcache::BlockStore>, TierError> open_store(uint32_t blocks, const Clock& clock) {
  kvcache::StoreConfig sc;
  sc.page_bytes = kPageBytes;
  sc.ram_bytes = static_cast<uint64_t>(blocks) * kPageBytes;
  sc.max_block_bytes = kPageBytes;
  sc.ssd_enabled = false;
  auto s = kvcache::BlockStore::open(sc, clock);
  if (!s.ok()) {
    return Error<TierError>{TierError::kOpen, "offload tier store of " + std::to_string(blocks) +
                                                  " blocks: " + s.error().message};
  }
  return std::move(*s);
}

}  // namespace

Result<std::unique_ptr<StoreTier>, TierError> StoreTier::open(const TierConfig& cfg,
                                                              const kvcache::BlockNamespace& ns,
                                                              const Clock& clock) {
  auto keys = kvcache::KeyDeriver::create(ns);
  if (!keys.ok()) {
    return Error<TierError>{TierError::kOpen, "offload tier namespace: " + keys.error().message};
  }
  auto ram = open_store(cfg.ram_blocks, clock);
  if (!ram.ok()) {
    return Error<TierError>{TierError::kOpen, ram.error().message};
  }
  std::unique_ptr<kvcache::BlockStore> ssd;
  if (cfg.ssd_blocks > 0) {
    auto s = open_store(cfg.ssd_blocks, clock);
    if (!s.ok()) {
      return Error<TierError>{TierError::kOpen, s.error().message};
    }
    ssd = std::move(*s);
  }
  return std::unique_ptr<StoreTier>(new StoreTier(*keys, std::move(*ram), std::move(ssd)));
}

StoreTier::StoreTier(kvcache::KeyDeriver keys, std::unique_ptr<kvcache::BlockStore> ram,
                     std::unique_ptr<kvcache::BlockStore> ssd)
    : keys_(std::move(keys)), ram_(std::move(ram)), ssd_(std::move(ssd)) {}

StoreTier::~StoreTier() = default;

void StoreTier::keys_of(std::span<const sim::BlockHash> hashes) {
  scratch_.clear();
  for (sim::BlockHash h : hashes) {
    scratch_.push_back(keys_.key(sim::block_digest(h)));
  }
}

void StoreTier::put(std::span<const sim::BlockHash> hashes, uint64_t /*block_bytes*/) {
  keys_of(hashes);
  for (const auto& k : scratch_) {
    // Synthetic bytes: the key itself. A put that fails (every block leased) loses the block,
    // as a full daemon would.
    (void)ram_->put(k, std::span<const uint8_t>(k.data(), k.size()));
    if (ssd_) {
      (void)ssd_->put(k, std::span<const uint8_t>(k.data(), k.size()));
    }
    ++puts_;
  }
}

void StoreTier::lookup(std::span<const sim::BlockHash> hashes, Nanos lease,
                       std::vector<sim::OffloadTierKind>& out) {
  keys_of(hashes);
  const kvcache::LookupResult ram = ram_->lookup(scratch_, lease);
  out.insert(out.end(), ram.tiers.size(), sim::OffloadTierKind::kRam);
  if (ssd_ && ram.tiers.size() < scratch_.size()) {
    const kvcache::LookupResult ssd =
        ssd_->lookup(std::span<const kvcache::BlockKey>(scratch_).subspan(ram.tiers.size()), lease);
    out.insert(out.end(), ssd.tiers.size(), sim::OffloadTierKind::kSsd);
  }
}

void StoreTier::resident(std::span<const sim::BlockHash> hashes, std::vector<sim::OffloadTierKind>& out) {
  lookup(hashes, 0, out);
}

}  // namespace cgn::bench
