#include "routing/prefix_index.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "routing/rng.h"
#include "routing/test_util.h"

namespace cgn::routing {
namespace {

using testing::digests;

constexpr Nanos kSec = kNanosPerSecond;

std::vector<Digest> slice(const std::vector<Digest>& v, size_t from, size_t to) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to)};
}

TEST(PrefixIndex, MatchCountsOnlyTheLeadingUnbrokenRun) {
  PrefixIndex idx;
  const auto d = digests(1, 6);
  // Node 0 holds blocks 0,1,3: its run stops at the hole at 2. Node 1 holds all six.
  idx.record_optimistic(0, slice(d, 0, 2), 0);
  idx.record_optimistic(0, slice(d, 3, 4), 0);
  idx.record_optimistic(1, d, 0);
  OverlapScratch out;
  idx.match(d, TierCredit{}, 4, out);
  EXPECT_EQ(out.run(0), 2u);
  EXPECT_EQ(out.run(1), 6u);
  EXPECT_EQ(out.run(2), 0u);
  EXPECT_FLOAT_EQ(out.credit(1), 6.0F);
}

TEST(PrefixIndex, StaggeredRunsAcrossManyHoldersIncludingOverflow) {
  PrefixIndex idx;
  const auto d = digests(2, 16);
  // Ten nodes (more than the three inline holders) with runs 1..10.
  for (NodeIndex n = 0; n < 10; ++n) {
    idx.record_optimistic(n, slice(d, 0, n + 1u), 0);
  }
  OverlapScratch out;
  idx.match(d, TierCredit{}, 16, out);
  for (NodeIndex n = 0; n < 10; ++n) {
    EXPECT_EQ(out.run(n), n + 1u) << "node " << n;
  }
  EXPECT_EQ(out.touched().size(), 10u);
  // Reusing the scratch for an unrelated request starts from zero.
  const auto other = digests(3, 4);
  idx.match(other, TierCredit{}, 16, out);
  for (NodeIndex n = 0; n < 10; ++n) {
    EXPECT_EQ(out.run(n), 0u);
  }
}

TEST(PrefixIndex, TierAndOptimisticCredit) {
  PrefixIndex idx;
  const auto d = digests(4, 4);
  idx.confirm(0, d, Tier::kEngine, 0);
  idx.confirm(1, d, Tier::kRam, 0);
  idx.confirm(2, d, Tier::kSsd, 0);
  idx.record_optimistic(3, d, 0);
  TierCredit credit;
  credit.optimistic = 0.5F;
  OverlapScratch out;
  idx.match(d, credit, 4, out);
  EXPECT_FLOAT_EQ(out.credit(0), 4.0F);
  EXPECT_FLOAT_EQ(out.credit(1), 3.0F);
  EXPECT_FLOAT_EQ(out.credit(2), 1.0F);
  EXPECT_FLOAT_EQ(out.credit(3), 2.0F);
  for (NodeIndex n = 0; n < 4; ++n) {
    EXPECT_EQ(out.run(n), 4u);
  }
}

TEST(PrefixIndex, ConfirmedOutranksOptimisticAndSurvivesTtl) {
  IndexConfig cfg;
  cfg.optimistic_ttl = 10 * kSec;
  PrefixIndex idx(cfg);
  const auto d = digests(5, 4);
  idx.record_optimistic(0, d, 0);
  idx.confirm(0, slice(d, 0, 2), Tier::kEngine, 1 * kSec);
  // A later optimistic record does not downgrade a confirmed entry.
  idx.record_optimistic(0, d, 2 * kSec);
  EntryState st{};
  ASSERT_TRUE(idx.state_of(0, d[0], &st, nullptr));
  EXPECT_EQ(st, EntryState::kConfirmed);
  ASSERT_TRUE(idx.state_of(0, d[3], &st, nullptr));
  EXPECT_EQ(st, EntryState::kOptimistic);
  EXPECT_EQ(idx.sweep_expired(11 * kSec), 0u);  // touched again at 2 s
  EXPECT_EQ(idx.sweep_expired(12 * kSec), 2u);  // the two optimistic ones go
  EXPECT_TRUE(idx.holds(0, d[0]));
  EXPECT_TRUE(idx.holds(0, d[1]));
  EXPECT_FALSE(idx.holds(0, d[2]));
  EXPECT_EQ(idx.entries(), 2u);
  EXPECT_EQ(idx.digests(), 2u);
}

TEST(PrefixIndex, MaybeSweepHonoursInterval) {
  IndexConfig cfg;
  cfg.optimistic_ttl = 1 * kSec;
  cfg.sweep_interval = 5 * kSec;
  PrefixIndex idx(cfg);
  idx.maybe_sweep(0);  // next sweep at 5 s
  idx.record_optimistic(0, digests(6, 3), 0);
  idx.maybe_sweep(2 * kSec);
  EXPECT_EQ(idx.entries(), 3u);  // expired, but no sweep is due yet
  idx.maybe_sweep(5 * kSec);
  EXPECT_EQ(idx.entries(), 0u);
}

TEST(PrefixIndex, CapacityKeepsLeadingBlocksOfTheNewestPrompt) {
  PrefixIndex idx;
  idx.set_node_capacity(0, 4);
  const auto a = digests(7, 6);
  idx.record_optimistic(0, a, 0);
  EXPECT_EQ(idx.node_entries(0), 4u);
  // The tail goes first, as in an engine's own LRU: the leading run survives.
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(idx.holds(0, a[i])) << i;
  }
  EXPECT_FALSE(idx.holds(0, a[4]));
  const auto b = digests(8, 2);
  idx.record_optimistic(0, b, kSec);
  EXPECT_EQ(idx.node_entries(0), 4u);
  EXPECT_TRUE(idx.holds(0, b[0]));
  EXPECT_TRUE(idx.holds(0, a[0]));
  EXPECT_FALSE(idx.holds(0, a[3]));
}

TEST(PrefixIndex, CapacityEvictsLeastRecentAcrossStatesOptimisticFirstOnTie) {
  PrefixIndex idx;
  const auto d = digests(9, 4);
  idx.confirm(0, slice(d, 0, 1), Tier::kEngine, 0);
  idx.record_optimistic(0, slice(d, 1, 2), 0);
  idx.record_optimistic(0, slice(d, 2, 3), 5);
  idx.confirm(0, slice(d, 3, 4), Tier::kEngine, 6);
  idx.set_node_capacity(0, 3);
  // Tie at t=0: the optimistic guess goes before the confirmed entry.
  EXPECT_FALSE(idx.holds(0, d[1]));
  EXPECT_TRUE(idx.holds(0, d[0]));
  idx.set_node_capacity(0, 2);
  EXPECT_FALSE(idx.holds(0, d[0]));  // confirmed but older than the optimistic d[2]
  EXPECT_TRUE(idx.holds(0, d[2]));
  EXPECT_TRUE(idx.holds(0, d[3]));
}

// A node's kvcached tiers hold more than its HBM: entries confirmed in RAM or SSD neither count
// against the engine's capacity nor are pruned by the engine's entries, only by their own cap.
TEST(PrefixIndex, TierEntriesHaveTheirOwnBoundBesideTheEnginesCapacity) {
  IndexConfig cfg;
  cfg.max_tier_entries = 3;
  PrefixIndex idx(cfg);
  idx.set_node_capacity(0, 2);
  const auto t = digests(20, 4);
  idx.confirm(0, slice(t, 0, 3), Tier::kRam, 0);
  const auto e = digests(21, 4);
  idx.confirm(0, e, Tier::kEngine, kSec);  // newer engine entries: two fit
  EXPECT_EQ(idx.node_entries(0), 5u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(idx.holds(0, t[i])) << i;
  }
  OverlapScratch out;
  idx.match(slice(t, 0, 3), TierCredit{}, 1, out);
  EXPECT_FLOAT_EQ(out.credit(0), 3 * TierCredit{}.ram);
  // A fourth tier entry: the least recently touched tier entry goes, no engine entry.
  idx.confirm(0, slice(t, 3, 4), Tier::kSsd, 2 * kSec);
  EXPECT_EQ(idx.node_entries(0), 5u);
  EXPECT_TRUE(idx.holds(0, t[3]));
  EXPECT_TRUE(idx.holds(0, e[0]));
  EXPECT_TRUE(idx.holds(0, e[1]));
  // An engine entry evicted to RAM moves to the tier bound; one taken back moves to the engine's.
  idx.confirm(0, slice(e, 0, 1), Tier::kRam, 3 * kSec);
  EXPECT_EQ(idx.node_entries(0), 4u);  // 3 tier (one more pruned), 1 engine
  idx.confirm(0, slice(t, 3, 4), Tier::kEngine, 4 * kSec);
  EXPECT_TRUE(idx.holds(0, t[3]));
  EXPECT_TRUE(idx.holds(0, e[1]));
}

TEST(PrefixIndex, DefaultCapacityAppliesWhenUnknown) {
  IndexConfig cfg;
  cfg.default_node_capacity = 5;
  PrefixIndex idx(cfg);
  idx.record_optimistic(2, digests(10, 9), 0);
  EXPECT_EQ(idx.node_entries(2), 5u);
  EXPECT_EQ(idx.node_capacity(2), 5u);
  cfg.default_node_capacity = 3;
  idx.set_config(cfg);
  EXPECT_EQ(idx.node_entries(2), 3u);
}

// [router.routing] index_max_entries: over the cap the node holding the most entries loses its
// least recently touched one; 0 leaves only the per-node capacities.
TEST(PrefixIndex, MaxEntriesCapsTheWholeIndexAtTheFullestNode) {
  IndexConfig cfg;
  cfg.max_entries = 6;
  PrefixIndex idx(cfg);
  const auto a = digests(11, 5);
  const auto b = digests(12, 2);
  idx.record_optimistic(0, a, 0);
  idx.record_optimistic(1, b, kSec);
  EXPECT_EQ(idx.entries(), 6u);
  EXPECT_EQ(idx.node_entries(0), 4u);
  EXPECT_EQ(idx.node_entries(1), 2u);
  EXPECT_TRUE(idx.holds(0, a[0]));
  EXPECT_FALSE(idx.holds(0, a[4]));  // the tail of node 0's prompt went first
  cfg.max_entries = 3;
  idx.set_config(cfg);  // a lower cap applies at once
  EXPECT_EQ(idx.entries(), 3u);
  cfg.max_entries = 0;
  idx.set_config(cfg);
  idx.record_optimistic(0, a, 2 * kSec);
  idx.record_optimistic(1, b, 2 * kSec);
  EXPECT_EQ(idx.entries(), 7u);
}

TEST(PrefixIndex, ClearAndRemoveDropRecordsWithTheirLastHolder) {
  PrefixIndex idx;
  const auto d = digests(11, 5);
  idx.record_optimistic(0, d, 0);
  idx.record_optimistic(1, slice(d, 0, 2), 0);
  EXPECT_EQ(idx.entries(), 7u);
  EXPECT_EQ(idx.digests(), 5u);
  EXPECT_EQ(idx.clear_node(0), 5u);
  EXPECT_EQ(idx.entries(), 2u);
  EXPECT_EQ(idx.digests(), 2u);
  idx.remove(1, slice(d, 1, 2));
  EXPECT_EQ(idx.digests(), 1u);
  EXPECT_TRUE(idx.holds(1, d[0]));
  idx.remove(1, slice(d, 1, 3));  // absent pairs are ignored
  EXPECT_EQ(idx.entries(), 1u);
}

// Random inserts, confirms, removals, clears and capacity changes against a plain model,
// through several table growths: catches probe-chain and overflow bookkeeping mistakes.
TEST(PrefixIndex, AgreesWithReferenceModelUnderRandomOperations) {
  PrefixIndex idx;
  const auto pool = digests(12, 3000);
  std::set<std::pair<NodeIndex, size_t>> model;
  Rng rng(42);
  constexpr NodeIndex kNodes = 12;
  for (NodeIndex n = 0; n < kNodes; ++n) {
    idx.set_node_capacity(n, 1'000'000);
  }
  for (int step = 0; step < 40'000; ++step) {
    const auto n = static_cast<NodeIndex>(rng.below(kNodes));
    const size_t i = rng.below(static_cast<uint32_t>(pool.size()));
    const uint32_t op = rng.below(100);
    std::span<const Digest> one(&pool[i], 1);
    if (op < 55) {
      idx.record_optimistic(n, one, step);
      model.insert({n, i});
    } else if (op < 75) {
      idx.confirm(n, one, Tier::kRam, step);
      model.insert({n, i});
    } else if (op < 99) {
      idx.remove(n, one);
      model.erase({n, i});
    } else {
      idx.clear_node(n);
      std::erase_if(model, [n](const auto& p) { return p.first == n; });
    }
  }
  EXPECT_EQ(idx.entries(), model.size());
  std::set<size_t> held;
  for (const auto& [n, i] : model) {
    held.insert(i);
  }
  EXPECT_EQ(idx.digests(), held.size());
  for (NodeIndex n = 0; n < kNodes; ++n) {
    for (size_t i = 0; i < pool.size(); i += 7) {
      ASSERT_EQ(idx.holds(n, pool[i]), model.count({n, i}) == 1) << "node " << n << " digest " << i;
    }
  }
}

TEST(DigestCapacity, DocumentedRule) {
  // vLLM capture: 2452 blocks of 16 tokens, ~4 bytes per token, 256-byte digest blocks.
  EXPECT_EQ(digest_capacity(2452, 16, 4.0, 256), 613u);
  EXPECT_EQ(digest_capacity(7281, 16, 4.0, 256), 1820u);
  EXPECT_EQ(digest_capacity(0, 16, 4.0, 256), 0u);  // unknown stays unknown
  EXPECT_EQ(digest_capacity(100, 0, 4.0, 256), 0u);
  EXPECT_EQ(digest_capacity(1, 1, 4.0, 256), 1u);  // never zero once known
}

}  // namespace
}  // namespace cgn::routing
