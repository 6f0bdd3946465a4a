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
      drop_hash(id);
      ++counters_.evictions;
    }
    blocks_[id].ref = 1;
    out.push_back(id);
  }
  return true;
}

void BlockPool::cache_block(BlockId id, BlockHash hash) {
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
  size_t n = 0;
  for (BlockId id = 0; id < blocks_.size(); ++id) {
    if (blocks_[id].ref == 0 && blocks_[id].has_hash) {
      drop_hash(id);
      ++n;
    }
  }
  counters_.evictions += n;
  return n;
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
