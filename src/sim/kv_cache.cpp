#include "sim/kv_cache.h"

#include <cassert>

namespace cgn::sim {

BlockHash hash_block(BlockHash parent, std::span<const TokenId> block_tokens) {
  uint64_t h = mix64(parent ^ (0x9e3779b97f4a7c15ULL * (block_tokens.size() + 1)));
  for (size_t i = 0; i + 1 < block_tokens.size(); i += 2) {
    const uint64_t pair = (static_cast<uint64_t>(block_tokens[i]) << 32) | block_tokens[i + 1];
    h = mix64(h ^ pair) + 0x9e3779b97f4a7c15ULL;
  }
  if (block_tokens.size() % 2 == 1) {
    h = mix64(h ^ block_tokens.back());
  }
  return h;
}

void extend_block_hashes(std::span<const TokenId> tokens, uint32_t block_size,
                         std::vector<BlockHash>& hashes) {
  const size_t full = tokens.size() / block_size;
  BlockHash parent = hashes.empty() ? kBlockHashSeed : hashes.back();
  for (size_t b = hashes.size(); b < full; ++b) {
    parent = hash_block(parent, tokens.subspan(b * block_size, block_size));
    hashes.push_back(parent);
  }
}

BlockPool::BlockPool(uint32_t num_blocks) : blocks_(num_blocks) {
  cached_.reserve(num_blocks);
  for (BlockId i = 0; i < num_blocks; ++i) {
    queue_push_back(i);
  }
}

void BlockPool::queue_push_back(BlockId id) {
  Block& b = blocks_[id];
  b.prev = tail_;
  b.next = kNoBlock;
  if (tail_ != kNoBlock) {
    blocks_[tail_].next = id;
  } else {
    head_ = id;
  }
  tail_ = id;
  ++num_free_;
}

void BlockPool::queue_remove(BlockId id) {
  Block& b = blocks_[id];
  if (b.prev != kNoBlock) {
    blocks_[b.prev].next = b.next;
  } else {
    head_ = b.next;
  }
  if (b.next != kNoBlock) {
    blocks_[b.next].prev = b.prev;
  } else {
    tail_ = b.prev;
  }
  b.prev = b.next = kNoBlock;
  --num_free_;
}

void BlockPool::drop_hash(BlockId id) {
  Block& b = blocks_[id];
  if (!b.has_hash) {
    return;
  }
  auto it = cached_.find(b.hash);
  if (it != cached_.end() && it->second == id) {
    cached_.erase(it);
  }
  b.has_hash = false;
  if (record_events_) {
    record_removed(b.hash);
  }
}

void BlockPool::record_removed(BlockHash h) {
  if (events_.empty() || events_.back().kind != KvCacheEvent::Kind::kRemoved ||
      events_.back().hashes.size() >= kMaxHashesPerEvent) {
    events_.push_back(KvCacheEvent{.kind = KvCacheEvent::Kind::kRemoved});
  }
  events_.back().hashes.push_back(h);
}

void BlockPool::take_events(std::vector<KvCacheEvent>& out) {
  for (auto& e : events_) {
    out.push_back(std::move(e));
  }
  events_.clear();
}

uint32_t BlockPool::count_cached_prefix(std::span<const BlockHash> hashes) const {
  uint32_t n = 0;
  for (BlockHash h : hashes) {
    if (cached_.find(h) == cached_.end()) {
      break;
    }
    ++n;
  }
  return n;
}

uint32_t BlockPool::acquire_cached_prefix(std::span<const BlockHash> hashes, uint32_t max_blocks,
                                          std::vector<BlockId>& out) {
  uint32_t n = 0;
  for (BlockHash h : hashes) {
    if (n >= max_blocks) {
      break;
    }
    auto it = cached_.find(h);
    if (it == cached_.end()) {
      break;
    }
    Block& b = blocks_[it->second];
    if (b.ref == 0) {
      queue_remove(it->second);
    }
    ++b.ref;
    out.push_back(it->second);
    ++n;
  }
  return n;
}

bool BlockPool::allocate(uint32_t n, std::vector<BlockId>& out) {
  if (n > num_free_) {
    return false;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const BlockId id = head_;
    assert(id != kNoBlock);
    queue_remove(id);
    if (blocks_[id].has_hash) {
      if (evicted_sink_ != nullptr) {
        evicted_sink_->push_back(blocks_[id].hash);
      }
      drop_hash(id);
      ++counters_.evictions;
    }
    blocks_[id].ref = 1;
    out.push_back(id);
  }
  return true;
}

void BlockPool::cache_block(BlockId id, BlockHash hash, const BlockHash* parent,
                            std::span<const TokenId> tokens, uint32_t block_size) {
  Block& b = blocks_[id];
  if (b.has_hash) {
    return;
  }
  auto [it, inserted] = cached_.try_emplace(hash, id);
  if (!inserted) {
    return;
  }
  b.hash = hash;
  b.has_hash = true;
  ++counters_.blocks_cached;
  if (!record_events_) {
    return;
  }
  // Continue the previous BlockStored when this block chains onto its last hash.
  if (!events_.empty() && events_.back().kind == KvCacheEvent::Kind::kStored && parent != nullptr &&
      !events_.back().hashes.empty() && events_.back().hashes.back() == *parent &&
      events_.back().block_size == block_size && events_.back().hashes.size() < kMaxHashesPerEvent) {
    events_.back().hashes.push_back(hash);
    events_.back().tokens.insert(events_.back().tokens.end(), tokens.begin(), tokens.end());
    return;
  }
  KvCacheEvent e{.kind = KvCacheEvent::Kind::kStored};
  e.hashes.push_back(hash);
  e.has_parent = parent != nullptr;
  e.parent = parent != nullptr ? *parent : 0;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.block_size = block_size;
  events_.push_back(std::move(e));
}

void BlockPool::release(std::span<const BlockId> ids) {
  for (size_t i = ids.size(); i-- > 0;) {
    Block& b = blocks_[ids[i]];
    assert(b.ref > 0);
    if (--b.ref == 0) {
      queue_push_back(ids[i]);
    }
  }
}

size_t BlockPool::evict_all() {
  const bool record = record_events_;
  record_events_ = false;  // decided below: one AllBlocksCleared, or the removals
  std::vector<BlockHash> dropped;
  for (BlockId id = 0; id < blocks_.size(); ++id) {
    if (blocks_[id].ref == 0 && blocks_[id].has_hash) {
      dropped.push_back(blocks_[id].hash);
      drop_hash(id);
    }
  }
  record_events_ = record;
  counters_.evictions += dropped.size();
  if (record_events_) {
    if (cached_.empty()) {
      // Nothing cached is left (vLLM's reset_prefix_cache).
      events_.push_back(KvCacheEvent{.kind = KvCacheEvent::Kind::kAllCleared});
    } else {
      for (BlockHash h : dropped) {
        record_removed(h);
      }
    }
  }
  return dropped.size();
}

size_t BlockPool::evict_hashes(std::span<const BlockHash> hashes) {
  size_t n = 0;
  for (BlockHash h : hashes) {
    auto it = cached_.find(h);
    if (it == cached_.end() || blocks_[it->second].ref != 0) {
      continue;
    }
    drop_hash(it->second);
    ++n;
  }
  counters_.evictions += n;
  return n;
}

}  // namespace cgn::sim
