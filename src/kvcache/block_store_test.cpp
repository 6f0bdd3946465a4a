#include "kvcache/block_store.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/digest.h"
#include "kvcache/store_test_util.h"

namespace cgn::kvcache {
namespace {

constexpr uint64_t kPage = 4096;

BlockKey key(uint64_t i) {
  return test_blocks::numbered_key(i);
}

using test_blocks::matches;
using test_blocks::pattern;

StoreConfig ram_config(uint64_t pages) {
  StoreConfig cfg;
  cfg.ram_bytes = pages * kPage;
  cfg.page_bytes = kPage;
  cfg.max_block_bytes = cfg.ram_bytes;
  return cfg;
}

std::unique_ptr<BlockStore> open_store(const StoreConfig& cfg, const Clock& clock = SteadyClock::instance()) {
  auto s = BlockStore::open(cfg, clock);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

void put_ok(BlockStore& s, uint64_t i, uint64_t length) {
  const std::vector<uint8_t> v = pattern(i, length);
  auto st = s.put(key(i), v);
  ASSERT_TRUE(st) << "put " << i << ": " << st.error().message;
}

bool resident(BlockStore& s, uint64_t i) {
  const BlockKey k = key(i);
  return !s.lookup({&k, 1}, 0).tiers.empty();
}

TEST(BlockStore, RoundTripsBlocksOfManySizes) {
  auto s = open_store(ram_config(1024));
  ASSERT_TRUE(s);
  const std::vector<uint64_t> sizes = {0, 1, 100, 4095, 4096, 4097, 65536 + 3, 1 << 20, (1 << 20) + 12345};
  for (size_t i = 0; i < sizes.size(); ++i) {
    put_ok(*s, i, sizes[i]);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto h = s->get(key(i));
    ASSERT_TRUE(h) << sizes[i];
    EXPECT_EQ(h->tier(), Tier::kRam);
    ASSERT_EQ(h->data().size(), sizes[i]);
    EXPECT_TRUE(matches(i, h->data())) << sizes[i];
    ASSERT_TRUE(h->arena_offset());
    EXPECT_EQ(*h->arena_offset() % kPage, 0u) << "values start page-aligned";
  }
  auto missing = s->get(key(1000));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, StoreError::kNotFound);
  const StoreStats st = s->stats();
  EXPECT_EQ(st.puts, sizes.size());
  EXPECT_EQ(st.ram.hits, sizes.size());
  EXPECT_EQ(st.ram.misses, 1u);
  EXPECT_EQ(st.ssd.misses, 0u) << "no SSD tier, no SSD misses";
  EXPECT_EQ(st.ram.blocks, sizes.size());
  EXPECT_EQ(st.ram.capacity, 1024u * kPage);
}

TEST(BlockStore, ArenaFdMapsTheBytesAtTheHandleOffset) {
  auto s = open_store(ram_config(64));
  ASSERT_TRUE(s);
  put_ok(*s, 5, 10000);
  auto h = s->get(key(5));
  ASSERT_TRUE(h && h->arena_offset());
  ASSERT_EQ(s->arena_bytes(), 64u * kPage);
  void* m = ::mmap(nullptr, s->arena_bytes(), PROT_READ, MAP_SHARED, s->arena_fd(), 0);
  ASSERT_NE(m, MAP_FAILED);
  EXPECT_TRUE(matches(5, {static_cast<const uint8_t*>(m) + *h->arena_offset(), 10000}));
  ::munmap(m, s->arena_bytes());
}

TEST(BlockStore, HalfWrittenBlockIsInvisibleUntilPutEnd) {
  auto s = open_store(ram_config(64));
  ASSERT_TRUE(s);
  auto started = s->put_start(key(1), 3 * kPage);
  ASSERT_TRUE(started && started->has_value());
  PutHandle h = std::move(**started);
  const std::vector<uint8_t> v = pattern(1, 3 * kPage);
  std::memcpy(h.data().data(), v.data(), kPage);  // half written
  const BlockKey k = key(1);
  EXPECT_TRUE(s->lookup({&k, 1}, kNanosPerSecond).tiers.empty());
  auto g = s->get(k);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, StoreError::kNotFound);
  auto again = s->put_start(k, 3 * kPage);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, StoreError::kBusy);
  std::memcpy(h.data().data(), v.data(), v.size());
  ASSERT_TRUE(s->put_end(std::move(h)));
  auto r = s->lookup({&k, 1}, 0);
  ASSERT_EQ(r.tiers.size(), 1u);
  EXPECT_EQ(r.tiers[0], Tier::kRam);
  auto got = s->get(k);
  ASSERT_TRUE(got);
  EXPECT_TRUE(matches(1, got->data()));
}

TEST(BlockStore, DroppedPutHandleFreesItsSpace) {
  auto s = open_store(ram_config(4));
  ASSERT_TRUE(s);
  put_ok(*s, 1, 2 * kPage);
  {
    auto started = s->put_start(key(2), 2 * kPage);
    ASSERT_TRUE(started && started->has_value());
    EXPECT_EQ(s->stats().ram.blocks, 1u);
  }  // dropped without put_end
  EXPECT_FALSE(resident(*s, 2));
  put_ok(*s, 3, 2 * kPage);  // fits in the freed pages: nothing evicted
  EXPECT_TRUE(resident(*s, 1));
  EXPECT_TRUE(resident(*s, 3));
  EXPECT_EQ(s->stats().ram.evictions, 0u);
  EXPECT_EQ(s->stats().ram.bytes, 4u * kPage);
}

// A reference LRU over a fixed number of equal-size blocks: what the RAM tier without SSD must
// reproduce exactly.
class ReferenceLru {
 public:
  explicit ReferenceLru(size_t capacity) : capacity_(capacity) {}
  bool contains(uint64_t k) const { return pos_.count(k) != 0; }
  void touch(uint64_t k) {
    order_.erase(pos_.at(k));
    order_.push_front(k);
    pos_[k] = order_.begin();
  }
  // Inserts or refreshes; returns true when it was resident.
  bool put(uint64_t k) {
    if (contains(k)) {
      touch(k);
      return true;
    }
    if (order_.size() == capacity_) {
      pos_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(k);
    pos_[k] = order_.begin();
    return false;
  }
  const std::list<uint64_t>& order() const { return order_; }

 private:
  size_t capacity_;
  std::list<uint64_t> order_;  // most recent first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> pos_;
};

TEST(BlockStore, WithoutSsdIsAnExactLruScripted) {
  auto s = open_store(ram_config(8));  // four blocks of two pages
  ASSERT_TRUE(s);
  ReferenceLru ref(4);
  // put 1..4, read 1, put 5 (evicts 2), refresh 3, put 6 (evicts 4), put 7 (evicts 1).
  const std::vector<std::pair<char, uint64_t>> script = {{'p', 1}, {'p', 2}, {'p', 3}, {'p', 4}, {'g', 1},
                                                         {'p', 5}, {'p', 3}, {'p', 6}, {'p', 7}};
  for (auto [op, k] : script) {
    if (op == 'p') {
      put_ok(*s, k, 2 * kPage - 1);
      ref.put(k);
    } else {
      ASSERT_TRUE(s->get(key(k)));
      ref.touch(k);
    }
  }
  EXPECT_EQ(ref.order(), (std::list<uint64_t>{7, 6, 3, 5}));
  for (uint64_t k = 1; k <= 7; ++k) {
    EXPECT_EQ(resident(*s, k), ref.contains(k)) << "block " << k;
  }
  EXPECT_EQ(s->stats().ram.evictions, 3u);
  EXPECT_EQ(s->stats().refreshes, 1u);
}

TEST(BlockStore, WithoutSsdMatchesAReferenceLruOverTenThousandRandomOps) {
  constexpr size_t kBlocks = 32;
  constexpr uint64_t kBlockPages = 3;
  auto s = open_store(ram_config(kBlocks * kBlockPages));
  ASSERT_TRUE(s);
  ReferenceLru ref(kBlocks);
  std::mt19937_64 rng(42);
  uint64_t hits = 0;
  for (int op = 0; op < 10000; ++op) {
    const uint64_t k = rng() % (3 * kBlocks);
    const uint64_t len = kBlockPages * kPage - rng() % kPage;  // always three pages
    switch (rng() % 3) {
      case 0: {  // put (insert or refresh)
        auto started = s->put_start(key(k), len);
        ASSERT_TRUE(started) << started.error().message;
        ASSERT_EQ(!started->has_value(), ref.put(k)) << "op " << op;
        if (started->has_value()) {
          const std::vector<uint8_t> v = pattern(k, len);
          std::memcpy((*started)->data().data(), v.data(), len);
          ASSERT_TRUE(s->put_end(std::move(**started)));
        }
        break;
      }
      case 1: {  // get: a hit refreshes
        auto h = s->get(key(k));
        ASSERT_EQ(h.ok(), ref.contains(k)) << "op " << op;
        if (h) {
          ++hits;
          ref.touch(k);
          ASSERT_TRUE(matches(k, h->data()));
        }
        break;
      }
      default: {  // lookup of a run: reports, does not reorder
        std::vector<BlockKey> keys;
        size_t expect = 0;
        bool broken = false;
        for (uint64_t j = 0; j < 4; ++j) {
          const uint64_t kk = (k + j) % (3 * kBlocks);
          keys.push_back(key(kk));
          broken = broken || !ref.contains(kk);
          expect += broken ? 0 : 1;
        }
        ASSERT_EQ(s->lookup(keys, 0).tiers.size(), expect) << "op " << op;
      }
    }
  }
  for (uint64_t k = 0; k < 3 * kBlocks; ++k) {
    EXPECT_EQ(resident(*s, k), ref.contains(k)) << "block " << k;
  }
  EXPECT_EQ(s->stats().ram.hits, hits);
  EXPECT_GT(hits, 1000u);
  EXPECT_GT(s->stats().ram.evictions, 1000u);
}

TEST(BlockStore, RefreshMovesABlockToMostRecentlyUsed) {
  auto s = open_store(ram_config(3));
  ASSERT_TRUE(s);
  put_ok(*s, 1, kPage);
  put_ok(*s, 2, kPage);
  put_ok(*s, 3, kPage);
  auto again = s->put_start(key(1), kPage);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->has_value()) << "a resident key writes nothing";
  put_ok(*s, 4, kPage);  // evicts 2, the least recently used now
  EXPECT_TRUE(resident(*s, 1));
  EXPECT_FALSE(resident(*s, 2));
  EXPECT_EQ(s->stats().refreshes, 1u);
  EXPECT_EQ(s->stats().puts, 4u);
}

TEST(BlockStore, LeaseHoldsBlocksAcrossAnEvictionStormUntilItExpires) {
  ManualClock clock(1000 * kNanosPerSecond);
  StoreConfig cfg = ram_config(16);
  cfg.max_lease = 10 * kNanosPerSecond;
  auto s = open_store(cfg, clock);
  ASSERT_TRUE(s);
  std::vector<BlockKey> leased;
  for (uint64_t i = 0; i < 4; ++i) {
    put_ok(*s, i, 2 * kPage);
    leased.push_back(key(i));
  }
  const LookupResult r = s->lookup(leased, 3600 * kNanosPerSecond);
  ASSERT_EQ(r.tiers.size(), 4u);
  EXPECT_EQ(r.lease_until, clock.now() + 10 * kNanosPerSecond) << "cut to max_lease";
  EXPECT_EQ(s->stats().leases_active, 4u);
  EXPECT_EQ(s->stats().leases_granted, 4u);
  for (uint64_t i = 100; i < 400; ++i) {  // far past capacity
    put_ok(*s, i, 2 * kPage);
  }
  for (uint64_t i = 0; i < 4; ++i) {
    auto h = s->get(key(i));
    ASSERT_TRUE(h) << "leased block " << i << " was evicted";
    EXPECT_TRUE(matches(i, h->data()));
  }
  clock.advance(11 * kNanosPerSecond);
  EXPECT_EQ(s->stats().leases_active, 0u);
  for (uint64_t i = 400; i < 408; ++i) {  // a capacity's worth: the expired blocks go now
    put_ok(*s, i, 2 * kPage);
  }
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_FALSE(resident(*s, i)) << "block " << i << " outlived its lease";
  }
}

TEST(BlockStore, PinnedReadSurvivesEvictionPressure) {
  auto s = open_store(ram_config(8));
  ASSERT_TRUE(s);
  put_ok(*s, 1, 2 * kPage);
  {
    auto h = s->get(key(1));
    ASSERT_TRUE(h);
    EXPECT_EQ(s->stats().pins_active, 1u);
    for (uint64_t i = 10; i < 50; ++i) {
      put_ok(*s, i, 2 * kPage);
    }
    EXPECT_TRUE(matches(1, h->data()));
    EXPECT_TRUE(resident(*s, 1));
  }
  EXPECT_EQ(s->stats().pins_active, 0u);
  for (uint64_t i = 50; i < 54; ++i) {
    put_ok(*s, i, 2 * kPage);
  }
  EXPECT_FALSE(resident(*s, 1)) << "an unpinned block is evictable again";
}

TEST(BlockStore, NoSpaceWhenEveryBlockIsPinnedOrHalfWritten) {
  auto s = open_store(ram_config(4));
  ASSERT_TRUE(s);
  put_ok(*s, 1, kPage);
  put_ok(*s, 2, kPage);
  put_ok(*s, 3, kPage);
  auto h1 = s->get(key(1));
  auto h2 = s->get(key(2));
  auto h3 = s->get(key(3));
  auto writing = s->put_start(key(4), kPage);
  ASSERT_TRUE(h1 && h2 && h3 && writing && writing->has_value());
  auto full = s->put_start(key(5), kPage);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, StoreError::kNoSpace);
  h2 = s->get(key(1));  // releases block 2's pin
  auto now_fits = s->put_start(key(5), kPage);
  ASSERT_TRUE(now_fits && now_fits->has_value());
  EXPECT_FALSE(resident(*s, 2));
}

TEST(BlockStore, RejectsBlocksLargerThanTheLimitOrTheArena) {
  StoreConfig cfg = ram_config(16);
  cfg.max_block_bytes = 8 * kPage;
  auto s = open_store(cfg);
  ASSERT_TRUE(s);
  auto big = s->put_start(key(1), 8 * kPage + 1);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, StoreError::kTooLarge);
  cfg.max_block_bytes = 1ull << 40;
  auto s2 = open_store(cfg);
  ASSERT_TRUE(s2);
  auto huge = s2->put_start(key(1), 17 * kPage);
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().code, StoreError::kTooLarge);
}

TEST(BlockStore, RejectsBadConfigNamingTheField) {
  StoreConfig cfg = ram_config(16);
  cfg.page_bytes = 1000;
  auto a = BlockStore::open(cfg, SteadyClock::instance());
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, StoreError::kConfig);
  EXPECT_NE(a.error().message.find("page_bytes"), std::string::npos);
  cfg = ram_config(16);
  cfg.ram_bytes += 1;
  auto b = BlockStore::open(cfg, SteadyClock::instance());
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("ram_bytes"), std::string::npos);
  cfg = ram_config(16);
  cfg.high_watermark = 1.5;
  auto c = BlockStore::open(cfg, SteadyClock::instance());
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("high_watermark"), std::string::npos);
  cfg = ram_config(16);
  cfg.spill_fraction = 0;
  auto d = BlockStore::open(cfg, SteadyClock::instance());
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("spill_fraction"), std::string::npos);
}

TEST(BlockStore, StopRefusesLaterCallsAndHandlesMayBeReleasedAfterIt) {
  auto s = open_store(ram_config(16));
  ASSERT_TRUE(s);
  put_ok(*s, 1, kPage);
  auto h = s->get(key(1));
  auto w = s->put_start(key(2), kPage);
  ASSERT_TRUE(h && w && w->has_value());
  s->stop();
  s->stop();  // idempotent
  EXPECT_EQ(s->put(key(3), pattern(3, 10)).error().code, StoreError::kStopped);
  EXPECT_EQ(s->get(key(1)).error().code, StoreError::kStopped);
  EXPECT_EQ(s->put_end(std::move(**w)).error().code, StoreError::kStopped);
  EXPECT_TRUE(matches(1, h->data())) << "a pinned block stays readable until released";
}

TEST(BlockStore, ConcurrentReadersAndWritersSeeOnlyWholeMatchingBlocks) {
  auto s = open_store(ram_config(96));  // small: constant eviction
  ASSERT_TRUE(s);
  constexpr uint64_t kKeys = 200;
  auto length_of = [](uint64_t k) { return 1000 + (k * 7919) % (5 * kPage); };
  std::atomic<uint64_t> gets{0}, bad{0}, errors{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int op = 0; op < 20000 && std::chrono::steady_clock::now() < deadline; ++op) {
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
          auto h = s->get(key(k));
          if (h) {
            ++gets;
            if (h->data().size() != length_of(k) || !matches(k, h->data())) {
              ++bad;
            }
          } else if (h.error().code != StoreError::kNotFound) {
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
  EXPECT_GT(gets.load(), 0u);
  const StoreStats st = s->stats();
  EXPECT_EQ(st.pins_active, 0u);
  EXPECT_LE(st.ram.bytes, s->arena_bytes());
}

}  // namespace
}  // namespace cgn::kvcache
