#include "kvcache/ram_arena.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unordered_map>

#include "core/digest.h"
#include "kvcache/slot_index.h"

namespace cgn::kvcache {
namespace {

// Whether n contiguous free pages exist anywhere (the allocator must find one iff so).
bool naive_has_run(const std::vector<bool>& used, uint32_t n) {
  uint32_t run = 0;
  for (bool u : used) {
    run = u ? 0 : run + 1;
    if (run >= n) {
      return true;
    }
  }
  return false;
}

TEST(PageAllocator, AllocatesRunsAcrossWordBoundariesAndFreesThem) {
  PageAllocator a(200);  // not a multiple of 64: the last word's tail is never handed out
  auto x = a.allocate(60);
  auto y = a.allocate(10);  // crosses the first word boundary
  ASSERT_TRUE(x && y);
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 60u);
  EXPECT_EQ(a.free_pages(), 130u);
  auto z = a.allocate(130);
  ASSERT_TRUE(z);
  EXPECT_EQ(*z, 70u);
  EXPECT_FALSE(a.allocate(1));
  a.release(*y, 10);
  EXPECT_FALSE(a.allocate(11));  // only a 10-page hole
  auto w = a.allocate(10);
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, 60u);
  EXPECT_EQ(a.free_pages(), 0u);
}

TEST(PageAllocator, NextFitWrapsAroundToEarlierHoles) {
  PageAllocator a(128);
  auto first = a.allocate(64);
  auto second = a.allocate(64);
  ASSERT_TRUE(first && second);
  a.release(*first, 64);
  auto again = a.allocate(32);  // the search starts after `second` and wraps to page 0
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 0u);
}

TEST(PageAllocator, FindsARunWheneverOneExistsUnderRandomTraffic) {
  constexpr uint32_t kPages = 1000;
  PageAllocator a(kPages);
  std::vector<bool> used(kPages, false);
  std::vector<std::pair<uint32_t, uint32_t>> live;
  std::mt19937 rng(7);
  for (int op = 0; op < 20000; ++op) {
    if (live.empty() || rng() % 3 != 0) {
      const uint32_t n = 1 + rng() % (rng() % 4 == 0 ? 100 : 8);
      const bool expect = naive_has_run(used, n);
      auto got = a.allocate(n);
      ASSERT_EQ(got.has_value(), expect) << "op " << op << " n " << n;
      if (got) {
        for (uint32_t p = *got; p < *got + n; ++p) {
          ASSERT_FALSE(used[p]) << "page " << p << " handed out twice";
          used[p] = true;
        }
        live.emplace_back(*got, n);
      }
    } else {
      const size_t i = rng() % live.size();
      a.release(live[i].first, live[i].second);
      for (uint32_t p = live[i].first; p < live[i].first + live[i].second; ++p) {
        used[p] = false;
      }
      live[i] = live.back();
      live.pop_back();
    }
    uint32_t free = 0;
    for (uint32_t p = 0; p < kPages; ++p) {
      ASSERT_EQ(a.used(p), used[p]);
      free += used[p] ? 0 : 1;
    }
    ASSERT_EQ(a.free_pages(), free);
  }
}

TEST(RamArena, IsASharedMemfdOfTheRequestedSize) {
  constexpr uint64_t kBytes = uint64_t{16} * 4096;
  auto arena = RamArena::create(kBytes, 4096);
  ASSERT_TRUE(arena) << arena.error().message;
  RamArena& ar = **arena;
  struct stat st {};
  ASSERT_EQ(::fstat(ar.fd(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), kBytes);
  EXPECT_EQ(ar.pages().pages(), 16u);
  // A second mapping of the fd (what a colocated engine does) sees the same bytes.
  std::span<uint8_t> s = ar.span(3, 10);
  std::memcpy(s.data(), "0123456789", 10);
  void* other = ::mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, ar.fd(), 0);
  ASSERT_NE(other, MAP_FAILED);
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(other) + ar.offset(3), "0123456789", 10), 0);
  ::munmap(other, kBytes);
}

// Descriptors and mappings of the arena's memfd ("memfd:cgn-kvcache-arena") in this process.
int arena_handles() {
  int n = 0;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    n += line.find("cgn-kvcache-arena") != std::string::npos ? 1 : 0;
  }
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    n += std::filesystem::read_symlink(e.path(), ec).string().find("cgn-kvcache-arena") != std::string::npos;
  }
  return n;
}

TEST(RamArena, AllocatesEveryPageInChunksAndStopsBetweenThemWhenAsked) {
  constexpr uint64_t kChunk = RamArena::kPrefaultChunkBytes;
  const int before = arena_handles();
  int asked = 0;
  auto stopped = RamArena::create(8 * kChunk, 4096, [&asked] { return ++asked == 3; });
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code, StoreError::kStopped);
  EXPECT_EQ(asked, 3) << "asked once before each chunk, and not after it said stop";
  EXPECT_NE(stopped.error().message.find(std::to_string(2 * kChunk) + " of " + std::to_string(8 * kChunk)),
            std::string::npos)
      << stopped.error().message;
  EXPECT_EQ(arena_handles(), before) << "a stopped arena leaves no mapping or descriptor behind";

  asked = 0;
  auto whole = RamArena::create(2 * kChunk + 4096, 4096, [&asked] { return ++asked > 100; });
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(asked, 3) << "two whole chunks and a partial one";
  // Every page is resident once create returns: no copy into the arena takes a fault.
  std::vector<unsigned char> resident((2 * kChunk + 4096) / 4096);
  uint8_t* base = (*whole)->span(0, 1).data();
  ASSERT_EQ(::mincore(base, 2 * kChunk + 4096, resident.data()), 0);
  EXPECT_TRUE(std::all_of(resident.begin(), resident.end(), [](unsigned char r) { return (r & 1) != 0; }));
}

TEST(SlotIndex, MatchesAMapUnderRandomInsertsAndErases) {
  constexpr uint32_t kMax = 500;
  std::vector<Digest> keys(kMax);
  std::vector<bool> present(kMax, false);
  for (uint32_t i = 0; i < kMax; ++i) {
    keys[i] = blake3_hash("key-" + std::to_string(i));
  }
  // Slot i holds key i; a few keys share their hash's high bits to force collisions.
  for (uint32_t i = 0; i < 50; ++i) {
    std::memcpy(keys[i].data() + 4, keys[0].data() + 4, 4);
  }
  auto key_of = [&](uint32_t s) -> const Digest& { return keys[s]; };
  SlotIndex index(kMax);
  std::mt19937 rng(11);
  uint32_t size = 0;
  for (int op = 0; op < 50000; ++op) {
    const uint32_t i = rng() % kMax;
    if (present[i]) {
      ASSERT_EQ(index.find(keys[i], key_of), i);
      index.erase(keys[i], key_of);
      present[i] = false;
      --size;
    } else {
      ASSERT_EQ(index.find(keys[i], key_of), SlotIndex::kNone);
      index.insert(keys[i], i);
      present[i] = true;
      ++size;
    }
    ASSERT_EQ(index.size(), size);
    if (op % 1000 == 0) {
      for (uint32_t k = 0; k < kMax; ++k) {
        ASSERT_EQ(index.find(keys[k], key_of), present[k] ? k : SlotIndex::kNone)
            << "op " << op << " key " << k;
      }
    }
  }
}

}  // namespace
}  // namespace cgn::kvcache
