#include "cluster/kv_publish_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace cgn::cluster {
namespace {

Digest dg(uint32_t i) {
  Digest d{};
  d[0] = static_cast<uint8_t>(i);
  d[1] = static_cast<uint8_t>(i >> 8);
  d[2] = static_cast<uint8_t>(i >> 16);
  d[31] = 0xab;
  return d;
}

std::vector<Digest> chain(uint32_t first, uint32_t n) {
  std::vector<Digest> out;
  for (uint32_t i = 0; i < n; ++i) {
    out.push_back(dg(first + i));
  }
  return out;
}

std::set<Digest> as_set(const std::vector<Digest>& v) {
  return {v.begin(), v.end()};
}

TEST(PublishCapacity, ConvertsEngineBlocksToDigestBlocksAndCaps) {
  // 512 blocks x 16 tokens x 4 bytes / 256 bytes per digest block = 128.
  EXPECT_EQ(publish_capacity(512, 16, 256), 128u);
  EXPECT_EQ(publish_capacity(512, 16, 128), 256u);
  // A big pool is capped at 4096 keys.
  EXPECT_EQ(publish_capacity(27500, 16, 256), kMaxPublishedPrefixes);
  EXPECT_EQ(publish_capacity(27500, 16, 256, 100), 100u);
  // Unknown pool or block size: only the cap applies.
  EXPECT_EQ(publish_capacity(0, 16, 256), kMaxPublishedPrefixes);
  EXPECT_EQ(publish_capacity(512, 0, 256), kMaxPublishedPrefixes);
  EXPECT_EQ(publish_capacity(512, 16, 0), kMaxPublishedPrefixes);
  // Absurd scrapes do not overflow.
  EXPECT_EQ(publish_capacity(UINT64_MAX, UINT32_MAX, 64), kMaxPublishedPrefixes);
}

TEST(KvPressure, BelowFivePercentFreeOfAKnownPool) {
  EXPECT_TRUE(under_kv_pressure(1000, 49));
  EXPECT_FALSE(under_kv_pressure(1000, 50));
  EXPECT_FALSE(under_kv_pressure(1000, std::nullopt));
  EXPECT_FALSE(under_kv_pressure(0, 0));
}

TEST(PublishedSet, FirstFlushPutsEveryNewDigestOnce) {
  PublishedSet s(100);
  s.touch(chain(0, 5));
  s.touch(chain(3, 4));  // 3, 4 again; 5, 6 new
  auto c = s.take_changes();
  EXPECT_FALSE(c.clear_all);
  EXPECT_EQ(as_set(c.puts), as_set(chain(0, 7)));
  EXPECT_EQ(c.puts.size(), 7u);
  EXPECT_TRUE(c.deletes.empty());
  // Nothing changed since: an empty flush.
  EXPECT_TRUE(s.take_changes().empty());
  // Touching published digests again changes nothing in etcd.
  s.touch(chain(0, 7));
  EXPECT_TRUE(s.take_changes().empty());
}

TEST(PublishedSet, EvictsLeastRecentlyUsedAndDeletesOnlyPublishedKeys) {
  PublishedSet s(4);
  s.touch(chain(0, 4));
  ASSERT_EQ(s.take_changes().puts.size(), 4u);
  s.touch(chain(10, 2));  // two new: two oldest go
  auto c = s.take_changes();
  EXPECT_EQ(as_set(c.puts), as_set(chain(10, 2)));
  // Within a chain the deepest digests are the oldest: 3 and 2 go, the roots 0 and 1 stay.
  EXPECT_EQ(as_set(c.deletes), as_set({dg(2), dg(3)}));
  EXPECT_TRUE(s.contains(dg(0)));
  EXPECT_TRUE(s.contains(dg(1)));
  // A digest added and evicted between two flushes never reaches etcd.
  s.touch(chain(20, 4));
  s.touch(chain(30, 4));
  c = s.take_changes();
  EXPECT_EQ(as_set(c.puts), as_set(chain(30, 4)));
  EXPECT_EQ(as_set(c.deletes), as_set({dg(0), dg(1), dg(10), dg(11)}));
}

TEST(PublishedSet, RetouchedBeforeDeleteFlushedNeedsNoPutAndNoDelete) {
  PublishedSet s(2);
  s.touch(chain(0, 2));
  (void)s.take_changes();
  s.touch(chain(5, 1));  // evicts 1 (deepest of the first chain)
  s.touch(chain(1, 1));  // 1 back: the key is still in etcd
  auto c = s.take_changes();
  EXPECT_EQ(as_set(c.puts), as_set({dg(5)}));
  EXPECT_EQ(as_set(c.deletes), as_set({dg(0)}));
}

TEST(PublishedSet, CapacityShrinkAndPruneEvictOldestFirst) {
  PublishedSet s(10);
  for (uint32_t i = 0; i < 10; ++i) {
    s.touch(chain(i, 1));  // 9 is the newest
  }
  (void)s.take_changes();
  s.set_capacity(6);
  EXPECT_EQ(s.size(), 6u);
  EXPECT_EQ(s.prune_oldest(2), 2u);
  EXPECT_EQ(s.entries(), (std::vector<Digest>{dg(9), dg(8), dg(7), dg(6)}));
  auto c = s.take_changes();
  EXPECT_EQ(as_set(c.deletes), as_set(chain(0, 6)));
  EXPECT_EQ(s.prune_oldest(100), 4u);
  EXPECT_EQ(s.size(), 0u);
}

TEST(PublishedSet, EpochClearDeletesEverythingAtOnce) {
  PublishedSet s(10);
  s.touch(chain(0, 5));
  (void)s.take_changes();
  s.touch(chain(7, 1));
  s.clear();
  s.touch(chain(100, 2));
  auto c = s.take_changes();
  EXPECT_TRUE(c.clear_all);
  EXPECT_EQ(as_set(c.puts), as_set(chain(100, 2)));
  EXPECT_TRUE(c.deletes.empty());  // the clear covers them
  EXPECT_EQ(c.ops(), 3u);
  EXPECT_FALSE(s.take_changes().clear_all);
}

TEST(PublishedSet, FailedFlushIsRetriedWithoutLossOrStaleDeletes) {
  PublishedSet s(3);
  s.touch(chain(0, 3));
  (void)s.take_changes();
  s.touch(chain(10, 2));  // evicts 2, 1
  auto failed = s.take_changes();
  ASSERT_EQ(as_set(failed.puts), as_set(chain(10, 2)));
  ASSERT_EQ(as_set(failed.deletes), as_set({dg(1), dg(2)}));
  // Meanwhile: 1 comes back (its key is still in etcd since the delete failed), 11 is evicted.
  s.touch(chain(1, 1));
  s.touch(chain(20, 1));
  s.restore_changes(failed);
  auto retry = s.take_changes();
  // 10 is still held and was never written; 11's put never landed so it needs no delete; 2
  // is still to delete; 1 is held again and must not be deleted.
  EXPECT_TRUE(std::find(retry.puts.begin(), retry.puts.end(), dg(10)) != retry.puts.end());
  EXPECT_TRUE(std::find(retry.deletes.begin(), retry.deletes.end(), dg(11)) == retry.deletes.end());
  EXPECT_TRUE(std::find(retry.deletes.begin(), retry.deletes.end(), dg(2)) != retry.deletes.end());
  EXPECT_TRUE(std::find(retry.deletes.begin(), retry.deletes.end(), dg(1)) == retry.deletes.end());
  for (const Digest& d : s.entries()) {
    const bool put = std::find(retry.puts.begin(), retry.puts.end(), d) != retry.puts.end();
    const bool deleted = std::find(retry.deletes.begin(), retry.deletes.end(), d) != retry.deletes.end();
    EXPECT_FALSE(put && deleted);
  }
}

TEST(PublishedSet, FailedClearIsRetried) {
  PublishedSet s(3);
  s.touch(chain(0, 3));
  (void)s.take_changes();
  s.clear();
  auto failed = s.take_changes();
  ASSERT_TRUE(failed.clear_all);
  s.restore_changes(failed);
  EXPECT_TRUE(s.take_changes().clear_all);
}

TEST(PublishedSet, MarkUnpublishedRepublishesTheWholeSet) {
  PublishedSet s(5);
  s.touch(chain(0, 5));
  (void)s.take_changes();
  s.touch(chain(9, 1));  // evicts 4: a pending delete
  s.mark_unpublished();
  auto c = s.take_changes();
  EXPECT_EQ(as_set(c.puts), as_set(s.entries()));
  EXPECT_EQ(c.puts.size(), 5u);
  EXPECT_TRUE(c.deletes.empty());
}

}  // namespace
}  // namespace cgn::cluster

namespace cgn::cluster {
namespace {

TEST(KvPrefixValue, RoundTripsEveryTierAndKeepsTheEngineValueANumber) {
  EXPECT_EQ(kv_prefix_value(7, routing::Tier::kEngine), "7");
  EXPECT_EQ(kv_prefix_value(7, routing::Tier::kRam), R"({"epoch":7,"tier":"ram"})");
  for (auto t : {routing::Tier::kEngine, routing::Tier::kRam, routing::Tier::kSsd}) {
    auto v = parse_kv_prefix_value(kv_prefix_value(42, t));
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->epoch, 42u);
    EXPECT_EQ(v->tier, t);
  }
  auto none = parse_kv_prefix_value("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->epoch.has_value());
  EXPECT_EQ(none->tier, routing::Tier::kEngine);
  auto bad = parse_kv_prefix_value(R"({"epoch":1,"tier":"vram"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tier"), std::string::npos);
}

}  // namespace
}  // namespace cgn::cluster

namespace cgn::cluster {
namespace {

TEST(PublishedSetResidency, TiersFillSpareRoomOnlyAndEngineEntriesKeepTheirTier) {
  PublishedSet s(3);
  s.touch(std::vector<Digest>{dg(1)});
  s.take_changes();
  const std::vector<std::pair<Digest, routing::Tier>> resident = {{dg(1), routing::Tier::kRam},
                                                                  {dg(2), routing::Tier::kRam},
                                                                  {dg(3), routing::Tier::kSsd},
                                                                  {dg(4), routing::Tier::kRam}};
  EXPECT_EQ(s.set_residency(resident, {}), 2u);  // dg(4): no room; dg(1): the engine's
  EXPECT_EQ(s.tier_of(dg(1)), routing::Tier::kEngine);
  EXPECT_EQ(s.tier_of(dg(3)), routing::Tier::kSsd);
  EXPECT_FALSE(s.tier_of(dg(4)).has_value());
  auto c = s.take_changes();
  ASSERT_EQ(c.puts.size(), 2u);
  ASSERT_EQ(c.put_tiers.size(), 2u);
  // The engine takes dg(2) back: a re-put at the engine tier. dg(3) leaves kvcached: deleted.
  s.touch(std::vector<Digest>{dg(2)});
  EXPECT_EQ(s.set_residency({}, std::vector<Digest>{dg(3), dg(1)}), 1u);
  c = s.take_changes();
  ASSERT_EQ(c.puts.size(), 1u);
  EXPECT_EQ(c.puts[0], dg(2));
  EXPECT_EQ(c.put_tiers[0], routing::Tier::kEngine);
  ASSERT_EQ(c.deletes.size(), 1u);
  EXPECT_EQ(c.deletes[0], dg(3));
  // Tier entries are the oldest: a new engine chain evicts them first.
  s.set_residency(std::vector<std::pair<Digest, routing::Tier>>{{dg(5), routing::Tier::kRam}}, {});
  s.touch(std::vector<Digest>{dg(6)});
  EXPECT_FALSE(s.tier_of(dg(5)).has_value());
  EXPECT_TRUE(s.tier_of(dg(1)).has_value());
}

// The engine's pool bounds the engine's entries only: a node whose HBM is full (the usual state)
// still publishes what its kvcached holds, up to the key cap.
TEST(PublishedSetResidency, TiersHaveRoomUpToTheKeyCapWhenTheEnginesPoolIsFull) {
  PublishedSet s(5);
  s.set_capacity(3);  // the engine's pool: three digests
  s.touch(std::vector<Digest>{dg(1), dg(2)});
  const std::vector<std::pair<Digest, routing::Tier>> resident = {
      {dg(3), routing::Tier::kRam}, {dg(4), routing::Tier::kRam}, {dg(5), routing::Tier::kSsd}};
  EXPECT_EQ(s.set_residency(resident, {}), 3u);
  EXPECT_EQ(s.size(), 5u);
  EXPECT_EQ(s.tier_of(dg(5)), routing::Tier::kSsd);
  // At the key cap a new engine digest takes the oldest tier entry's key, never an engine one's.
  s.touch(std::vector<Digest>{dg(6)});
  EXPECT_EQ(s.size(), 5u);
  EXPECT_FALSE(s.tier_of(dg(3)).has_value());
  EXPECT_EQ(s.tier_of(dg(6)), routing::Tier::kEngine);
}

// kvcached may report a digest while the engine still holds it (the answer is ignored then); when
// the engine lets it go (its pool's bound, a KV-event withdrawal) it is published at its tier,
// not deleted, though no later answer repeats it.
TEST(PublishedSetResidency, ADigestTheEngineLetsGoStaysPublishedAtTheTierKvcachedReported) {
  PublishedSet s(10);
  s.touch(std::vector<Digest>{dg(1), dg(2)});
  EXPECT_EQ(s.set_residency(std::vector<std::pair<Digest, routing::Tier>>{{dg(2), routing::Tier::kRam}}, {}),
            0u);
  (void)s.take_changes();
  EXPECT_EQ(s.prune_oldest(1), 1u);  // the engine evicted one digest's blocks: dg(2), the chain's tail
  EXPECT_EQ(s.tier_of(dg(2)), routing::Tier::kRam);
  auto c = s.take_changes();
  ASSERT_EQ(c.puts.size(), 1u);
  EXPECT_EQ(c.puts[0], dg(2));
  EXPECT_EQ(c.put_tiers[0], routing::Tier::kRam);
  EXPECT_TRUE(c.deletes.empty());
  // The same through the pool's bound: dg(1) leaves the engine for dg(7); unknown to kvcached, deleted.
  s.set_capacity(1);
  s.touch(std::vector<Digest>{dg(7)});
  EXPECT_FALSE(s.contains(dg(1)));
  EXPECT_EQ(s.tier_of(dg(2)), routing::Tier::kRam);
  c = s.take_changes();
  EXPECT_EQ(c.deletes, std::vector<Digest>{dg(1)});
  // A new epoch forgets the engine's entries but publishes kvcached's again.
  s.clear();
  EXPECT_EQ(s.entries(), std::vector<Digest>{dg(2)});
  c = s.take_changes();
  EXPECT_TRUE(c.clear_all);
  EXPECT_EQ(c.puts, std::vector<Digest>{dg(2)});
  // Once kvcached no longer holds it, it goes.
  EXPECT_EQ(s.set_residency({}, std::vector<Digest>{dg(2)}), 1u);
  EXPECT_EQ(s.size(), 0u);
}

}  // namespace
}  // namespace cgn::cluster
