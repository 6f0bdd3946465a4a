// The block store over a real SSD tier (segment files in a per-test temporary directory).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/digest.h"
#include "kvcache/block_store.h"
#include "kvcache/store_test_util.h"
#include "testing/process.h"

namespace cgn::kvcache {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kPage = 4096;

BlockKey key(uint64_t i) {
  return test_blocks::numbered_key(i);
}

using test_blocks::matches;
using test_blocks::pattern;

class BlockStoreSsd : public ::testing::Test {
 protected:
  StoreConfig config(uint64_t ram_pages) const {
    StoreConfig cfg;
    cfg.ram_bytes = ram_pages * kPage;
    cfg.page_bytes = kPage;
    cfg.max_block_bytes = cfg.ram_bytes;
    cfg.high_watermark = 1.0;  // no background spill unless a test lowers it
    cfg.ssd_enabled = true;
    cfg.ssd.dir = dir_.path() + "/ssd";
    cfg.ssd.segment_bytes = 1 << 20;
    return cfg;
  }

  std::unique_ptr<BlockStore> open(const StoreConfig& cfg, const Clock& clock = SteadyClock::instance()) {
    auto s = BlockStore::open(cfg, clock);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return s ? std::move(*s) : nullptr;
  }

  static void put_ok(BlockStore& s, uint64_t i, uint64_t length) {
    auto st = s.put(key(i), pattern(i, length));
    ASSERT_TRUE(st) << "put " << i << ": " << st.error().message;
  }

  static Tier tier_of(BlockStore& s, uint64_t i) {
    const BlockKey k = key(i);
    const LookupResult r = s.lookup({&k, 1}, 0);
    return r.tiers.empty() ? Tier::kNone : r.tiers[0];
  }

  testing::TempDir dir_;
};

TEST_F(BlockStoreSsd, StatsSayWhetherTheSsdTierUsesODirect) {
  StoreConfig cfg = config(16);
  cfg.ssd.direct_io = DirectIo::kOff;
  auto buffered = open(cfg);
  ASSERT_TRUE(buffered);
  EXPECT_FALSE(buffered->stats().ssd_direct_io);
  buffered->stop();
  buffered.reset();
  cfg.ssd.direct_io = DirectIo::kOn;
  auto direct = BlockStore::open(cfg, SteadyClock::instance());
  if (!direct) {
    GTEST_SKIP() << "the temp directory's filesystem refuses O_DIRECT: " << direct.error().message;
  }
  EXPECT_TRUE((*direct)->stats().ssd_direct_io);
}

TEST_F(BlockStoreSsd, SpillAboveTheWatermarkMovesLeastRecentBlocksToSsd) {
  StoreConfig cfg = config(100);
  cfg.high_watermark = 0.5;
  cfg.spill_fraction = 0.2;
  auto s = open(cfg);
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 60; ++i) {
    put_ok(*s, i, kPage - 10);
  }
  // 60 pages used > 50: rounds of 20 pages run until use is under the mark.
  ASSERT_TRUE(testing::wait_until([&] { return s->stats().ram.bytes <= 50u * kPage; }, 20s));
  const StoreStats st = s->stats();
  EXPECT_GE(st.spilled_blocks, 10u);
  EXPECT_EQ(st.ram.evictions, 0u);
  EXPECT_EQ(st.spill_errors, 0u);
  EXPECT_EQ(tier_of(*s, 0), Tier::kSsd) << "the least recent block went first";
  EXPECT_EQ(tier_of(*s, 59), Tier::kRam) << "the most recent block stayed";
  for (uint64_t i = 0; i < 60; ++i) {
    auto h = s->get(key(i));
    ASSERT_TRUE(h) << "block " << i << " was lost";
    EXPECT_TRUE(matches(i, h->data())) << "block " << i;
  }
  EXPECT_GE(s->stats().ssd.hits, 10u);
}

TEST_F(BlockStoreSsd, BlockEvictedForAPutGoesToSsdNotAway) {
  auto s = open(config(8));
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 20; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  const StoreStats st = s->stats();
  EXPECT_EQ(st.ram.evictions, 0u);
  EXPECT_EQ(st.spilled_blocks, 16u);
  EXPECT_EQ(st.spilled_bytes, kPage * 2 * 16);
  EXPECT_EQ(st.ram.blocks, 4u);
  std::vector<BlockKey> keys;
  for (uint64_t i = 0; i < 20; ++i) {
    keys.push_back(key(i));
  }
  const LookupResult r = s->lookup(keys, 0);
  ASSERT_EQ(r.tiers.size(), 20u);
  EXPECT_EQ(r.tiers[0], Tier::kSsd);
  EXPECT_EQ(r.tiers[19], Tier::kRam);
  for (uint64_t i = 0; i < 16; ++i) {
    auto h = s->get(key(i));
    ASSERT_TRUE(h) << "block " << i << ": " << h.error().message;
    EXPECT_EQ(h->tier(), Tier::kSsd);
    EXPECT_FALSE(h->arena_offset());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(h->data().data()) % kPage, 0u) << "an O_DIRECT read lands in place";
    const ReadHandle moved = std::move(*h);
    EXPECT_TRUE(matches(i, moved.data()));
  }
  EXPECT_EQ(s->get(key(999)).error().code, StoreError::kNotFound);
  const StoreStats after = s->stats();
  EXPECT_EQ(after.ssd.hits, 16u);
  EXPECT_EQ(after.ram.misses, 17u);
  EXPECT_EQ(after.ssd.misses, 1u);
}

TEST_F(BlockStoreSsd, PutOfABlockOnSsdOnlyRefreshesAndWritesNothing) {
  auto s = open(config(4));
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 6; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  ASSERT_EQ(tier_of(*s, 0), Tier::kSsd);
  const StoreStats before = s->stats();
  auto again = s->put_start(key(0), 2 * kPage);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->has_value());
  const StoreStats after = s->stats();
  EXPECT_EQ(after.refreshes, before.refreshes + 1);
  EXPECT_EQ(after.puts, before.puts);
  EXPECT_EQ(after.spilled_blocks, before.spilled_blocks);
}

TEST_F(BlockStoreSsd, PinInRamPromotesAnSsdBlockIntoTheArena) {
  auto s = open(config(8));
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 8; ++i) {
    put_ok(*s, i, 2 * kPage + 1);  // three pages each: two fit
  }
  ASSERT_EQ(tier_of(*s, 0), Tier::kSsd);
  {
    auto h = s->get(key(0), /*pin_in_ram=*/true);
    ASSERT_TRUE(h) << h.error().message;
    EXPECT_EQ(h->tier(), Tier::kSsd);
    ASSERT_TRUE(h->arena_offset());
    EXPECT_EQ(*h->arena_offset() % kPage, 0u);
    EXPECT_TRUE(matches(0, h->data()));
    EXPECT_EQ(s->stats().promotions, 1u);
    EXPECT_EQ(s->stats().pins_active, 1u);
    EXPECT_EQ(tier_of(*s, 0), Tier::kRam);
  }
  auto again = s->get(key(0));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->tier(), Tier::kRam);
  EXPECT_TRUE(matches(0, again->data()));
  EXPECT_EQ(s->stats().promotions, 1u);
}

TEST_F(BlockStoreSsd, PromotedBlockLeavesRamWithoutASecondWrite) {
  auto s = open(config(4));
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 4; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  ASSERT_TRUE(s->get(key(0), /*pin_in_ram=*/true));  // promoted, unpinned at once
  const uint64_t spilled = s->stats().spilled_blocks;
  put_ok(*s, 10, 2 * kPage);
  put_ok(*s, 11, 2 * kPage);  // evicts the promoted block: it is on SSD already
  EXPECT_EQ(tier_of(*s, 0), Tier::kSsd);
  EXPECT_EQ(s->stats().spilled_blocks, spilled + 1) << "only the other evicted block was written";
}

TEST_F(BlockStoreSsd, BackgroundSpillFreesAPromotedBlockWithoutRewritingIt) {
  StoreConfig cfg = config(8);
  cfg.high_watermark = 0.7;   // above 5.6 pages
  cfg.spill_fraction = 0.25;  // two pages: one block per round
  auto s = open(cfg);
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 3; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  ASSERT_TRUE(testing::wait_until([&] { return s->stats().ram.bytes == 4u * kPage; }, 20s));
  ASSERT_EQ(s->stats().spilled_blocks, 1u);
  ASSERT_EQ(tier_of(*s, 0), Tier::kSsd);
  auto h1 = s->get(key(1));  // pinned: the next round can only take block 0
  auto h2 = s->get(key(2));
  ASSERT_TRUE(h1 && h2);
  ASSERT_TRUE(s->get(key(0), /*pin_in_ram=*/true));  // promoted (six pages), released at once
  ASSERT_TRUE(testing::wait_until([&] { return s->stats().ram.bytes == 4u * kPage; }, 20s));
  EXPECT_EQ(tier_of(*s, 0), Tier::kSsd);
  EXPECT_EQ(s->stats().spilled_blocks, 1u) << "block 0 was on SSD already";
  EXPECT_EQ(s->stats().promotions, 1u);
  auto again = s->get(key(0));
  ASSERT_TRUE(again);
  EXPECT_TRUE(matches(0, again->data()));
}

TEST_F(BlockStoreSsd, PromotedBlockWhoseSsdCopyWasEvictedIsWrittenAgainWhenItLeavesRam) {
  StoreConfig cfg = config(4);  // two blocks of two pages
  cfg.ssd.segment_bytes = 4 * kPage;
  cfg.ssd.max_bytes = 24 * kPage;  // a few records
  auto s = open(cfg);
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 3; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  ASSERT_EQ(tier_of(*s, 0), Tier::kSsd);
  {
    auto pinned = s->get(key(0), /*pin_in_ram=*/true);  // promoted and held in RAM
    ASSERT_TRUE(pinned);
    for (uint64_t i = 100; i < 140; ++i) {  // pushes block 0's old record off the SSD
      put_ok(*s, i, 2 * kPage);
    }
    ASSERT_GT(s->stats().ssd.evictions, 10u);
    ASSERT_EQ(tier_of(*s, 0), Tier::kRam);
  }
  put_ok(*s, 200, 2 * kPage);
  put_ok(*s, 201, 2 * kPage);  // block 0 leaves RAM now
  ASSERT_EQ(tier_of(*s, 0), Tier::kSsd) << "block 0 was dropped instead of written again";
  auto h = s->get(key(0));
  ASSERT_TRUE(h);
  EXPECT_TRUE(matches(0, h->data()));
}

TEST_F(BlockStoreSsd, FullSsdCountsSpillErrorsAndRamKeepsServing) {
  StoreConfig cfg = config(8);
  cfg.ssd.max_bytes = kPage;  // smaller than one record: every spill fails
  auto s = open(cfg);
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 20; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  const StoreStats st = s->stats();
  EXPECT_EQ(st.spilled_blocks, 0u);
  EXPECT_EQ(st.spill_errors, 16u);
  EXPECT_EQ(st.ram.evictions, 16u) << "a block that cannot be spilled is dropped";
  EXPECT_NE(st.ssd_error.find("disk_full"), std::string::npos) << st.ssd_error;
  for (uint64_t i = 16; i < 20; ++i) {
    auto h = s->get(key(i));
    ASSERT_TRUE(h) << "block " << i;
    EXPECT_TRUE(matches(i, h->data()));
  }
  EXPECT_EQ(tier_of(*s, 0), Tier::kNone);
}

TEST_F(BlockStoreSsd, StatsKeepTheSsdNumbersAfterStop) {
  auto s = open(config(4));
  ASSERT_TRUE(s);
  ASSERT_TRUE(testing::wait_until([&] { return s->stats().scan_complete; }, 20s));
  for (uint64_t i = 0; i < 4; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  s->stop();
  const StoreStats st = s->stats();
  EXPECT_EQ(st.spilled_blocks, 2u);
  EXPECT_EQ(st.ssd.blocks, 2u);
  EXPECT_GT(st.ssd.bytes, 0u);
  EXPECT_TRUE(st.scan_complete);
  EXPECT_EQ(s->get(key(0)).error().code, StoreError::kStopped);
}

TEST_F(BlockStoreSsd, LeaseKeepsAnSsdOnlyBlockFromSsdEvictionUntilItExpires) {
  ManualClock clock(1000 * kNanosPerSecond);
  StoreConfig cfg = config(4);
  cfg.ssd.segment_bytes = 4 * kPage;  // about one record per segment
  cfg.ssd.max_bytes = 64 * kPage;     // room for a dozen or so records
  auto s = open(cfg, clock);
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 4; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  ASSERT_EQ(tier_of(*s, 0), Tier::kSsd);
  const BlockKey k0 = key(0);
  const LookupResult r = s->lookup({&k0, 1}, 5 * kNanosPerSecond);
  ASSERT_EQ(r.tiers, std::vector<Tier>{Tier::kSsd});
  EXPECT_EQ(s->stats().leases_active, 1u);
  for (uint64_t i = 100; i < 160; ++i) {  // several times the SSD bound
    put_ok(*s, i, 2 * kPage);
  }
  EXPECT_GT(s->stats().ssd.evictions, 0u);
  EXPECT_EQ(tier_of(*s, 1), Tier::kNone) << "an unleased block of the same age was evicted";
  auto h = s->get(k0);
  ASSERT_TRUE(h) << "the leased block was evicted: " << h.error().message;
  EXPECT_TRUE(matches(0, h->data()));
  clock.advance(6 * kNanosPerSecond);
  EXPECT_EQ(s->stats().leases_active, 0u);
  for (uint64_t i = 200; i < 260; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  EXPECT_EQ(tier_of(*s, 0), Tier::kNone) << "the lease expired: the block is evictable again";
}

TEST_F(BlockStoreSsd, ConcurrentReadersWritersAndSpillsSeeOnlyWholeMatchingBlocks) {
  StoreConfig cfg = config(64);
  cfg.high_watermark = 0.6;
  cfg.spill_fraction = 0.1;
  auto s = open(cfg);
  ASSERT_TRUE(s);
  constexpr uint64_t kKeys = 300;
  auto length_of = [](uint64_t k) { return 500 + (k * 7919) % (3 * kPage); };
  std::atomic<uint64_t> gets{0}, ssd_gets{0}, bad{0}, errors{0};
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int op = 0; op < 5000 && std::chrono::steady_clock::now() < deadline; ++op) {
        const uint64_t k = rng() % kKeys;
        const int what = static_cast<int>(rng() % 4);
        if (what == 0) {
          auto st = s->put(key(k), pattern(k, length_of(k)));
          if (!st && st.error().code != StoreError::kBusy && st.error().code != StoreError::kNoSpace) {
            ++errors;
          }
        } else if (what == 1) {
          std::vector<BlockKey> run = {key(k), key((k + 1) % kKeys)};
          (void)s->lookup(run, static_cast<Nanos>(rng() % 2) * kNanosPerMilli);
        } else {
          auto h = s->get(key(k), /*pin_in_ram=*/rng() % 2 == 0);
          if (h) {
            ++gets;
            ssd_gets += h->tier() == Tier::kSsd ? 1 : 0;
            if (h->data().size() != length_of(k) || !matches(k, h->data())) {
              ++bad;
            }
          } else if (h.error().code != StoreError::kNotFound && h.error().code != StoreError::kBusy &&
                     h.error().code != StoreError::kNoSpace) {
            ++errors;
          }
        }
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GT(ssd_gets.load(), 0u);
  const StoreStats st = s->stats();
  EXPECT_EQ(st.pins_active, 0u);
  EXPECT_EQ(st.spill_errors, 0u);
  EXPECT_EQ(st.ram.evictions, 0u) << "with room on SSD no block is dropped";
}

}  // namespace
}  // namespace cgn::kvcache
