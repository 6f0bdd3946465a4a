#include "sim/kv_cache.h"

#include <gtest/gtest.h>

namespace cgn::sim {
namespace {

std::vector<BlockHash> chain(uint64_t salt, size_t n) {
  std::vector<TokenId> toks(n * 16);
  for (size_t i = 0; i < toks.size(); ++i) {
    toks[i] = static_cast<TokenId>(mix64(salt + i) % kTextVocab);
  }
  std::vector<BlockHash> h;
  extend_block_hashes(toks, 16, h);
  return h;
}

// Allocates len(hashes) blocks, registers them, releases them (a finished request).
std::vector<BlockId> serve(BlockPool& pool, const std::vector<BlockHash>& hashes) {
  std::vector<BlockId> ids;
  pool.acquire_cached_prefix(hashes, static_cast<uint32_t>(hashes.size()), ids);
  const size_t hit = ids.size();
  EXPECT_TRUE(pool.allocate(static_cast<uint32_t>(hashes.size() - hit), ids));
  for (size_t i = hit; i < hashes.size(); ++i) {
    pool.cache_block(ids[i], hashes[i]);
  }
  pool.release(ids);
  return ids;
}

TEST(BlockHashes, ChainedOverFullBlocksOnly) {
  std::vector<TokenId> toks(40, 7);
  std::vector<BlockHash> h;
  extend_block_hashes(toks, 16, h);
  ASSERT_EQ(h.size(), 2u);  // 40 tokens = 2 full blocks + a partial one
  EXPECT_EQ(h[0], hash_block(kBlockHashSeed, std::span<const TokenId>(toks).first(16)));
  EXPECT_EQ(h[1], hash_block(h[0], std::span<const TokenId>(toks).subspan(16, 16)));
  EXPECT_NE(h[0], h[1]);  // same tokens, different position
}

TEST(BlockPool, CachedBlocksAreReusedByTheSamePrefix) {
  BlockPool pool(16);
  const auto a = chain(1, 4);
  serve(pool, a);
  EXPECT_EQ(pool.count_cached_prefix(a), 4u);
  EXPECT_EQ(pool.num_free(), 16u);  // cached but unreferenced blocks count as free
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
}

TEST(BlockPool, EvictionPrefersLeastRecentlyFreedUnreferencedBlocks) {
  BlockPool pool(8);
  const auto a = chain(1, 4);
  const auto b = chain(2, 4);
  serve(pool, a);  // a freed first
  serve(pool, b);  // b freed later
  // A new 3-block request evicts from the LRU end: a's blocks, tail first.
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.allocate(3, ids));
  EXPECT_EQ(pool.count_cached_prefix(b), 4u);
  EXPECT_EQ(pool.count_cached_prefix(a), 1u);  // a's head survives: tails are evicted first
  EXPECT_EQ(pool.counters().evictions, 3u);
  pool.release(ids);
}

TEST(BlockPool, ReferencedBlocksAreNeverEvicted) {
  BlockPool pool(4);
  const auto a = chain(1, 4);
  std::vector<BlockId> held;
  ASSERT_TRUE(pool.allocate(4, held));
  for (size_t i = 0; i < 4; ++i) {
    pool.cache_block(held[i], a[i]);
  }
  std::vector<BlockId> more;
  EXPECT_FALSE(pool.allocate(1, more));
  EXPECT_TRUE(more.empty());
  EXPECT_EQ(pool.evict_all(), 0u);
  EXPECT_EQ(pool.count_cached_prefix(a), 4u);
  EXPECT_DOUBLE_EQ(pool.usage(), 1.0);
  pool.release(held);
  EXPECT_EQ(pool.evict_all(), 4u);
  EXPECT_EQ(pool.count_cached_prefix(a), 0u);
}

TEST(BlockPool, TouchingACachedBlockTakesItOffTheFreeQueue) {
  BlockPool pool(4);
  const auto a = chain(1, 2);
  serve(pool, a);
  std::vector<BlockId> ids;
  EXPECT_EQ(pool.acquire_cached_prefix(a, 2, ids), 2u);
  EXPECT_EQ(pool.num_free(), 2u);
  std::vector<BlockId> fresh;
  EXPECT_TRUE(pool.allocate(2, fresh));
  EXPECT_FALSE(pool.allocate(1, fresh));
  EXPECT_EQ(pool.count_cached_prefix(a), 2u);
  pool.release(ids);
  pool.release(fresh);
}

TEST(BlockPool, EvictHashesDropsOnlyThatChain) {
  BlockPool pool(16);
  const auto a = chain(1, 3);
  const auto b = chain(2, 3);
  serve(pool, a);
  serve(pool, b);
  EXPECT_EQ(pool.evict_hashes(a), 3u);
  EXPECT_EQ(pool.count_cached_prefix(a), 0u);
  EXPECT_EQ(pool.count_cached_prefix(b), 3u);
}

TEST(BlockPool, DuplicateHashKeepsTheFirstCopy) {
  BlockPool pool(4);
  const auto a = chain(1, 1);
  std::vector<BlockId> x, y;
  ASSERT_TRUE(pool.allocate(1, x));
  ASSERT_TRUE(pool.allocate(1, y));
  pool.cache_block(x[0], a[0]);
  pool.cache_block(y[0], a[0]);
  EXPECT_EQ(pool.num_cached(), 1u);
  pool.release(y);
  pool.release(x);
}

}  // namespace
}  // namespace cgn::sim
