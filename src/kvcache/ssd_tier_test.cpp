#include "kvcache/ssd_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/digest.h"
#include "kvcache/segment.h"
#include "testing/capability.h"
#include "testing/process.h"

namespace cgn::kvcache {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr Nanos kWallStart = 1'800'000'000'000'000'000;  // 2027-01-15, unix ns

BlockKey key_of(int i) {
  return blake3_hash("ssd tier test key " + std::to_string(i));
}

std::vector<uint8_t> value_of(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// A page-aligned buffer (the arena's blocks are page-aligned; O_DIRECT reads land in place).
struct Aligned {
  explicit Aligned(size_t n)
      : size(n), p(static_cast<uint8_t*>(std::aligned_alloc(4096, round_up_page(n + 1)))) {}
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  std::span<uint8_t> span() { return {p, size}; }
  size_t size;
  uint8_t* p;
};

std::vector<std::string> segment_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& de : fs::directory_iterator(dir)) {
    if (parse_segment_name(de.path().filename().string())) {
      out.push_back(de.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t file_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& f : segment_files(dir)) {
    n += fs::file_size(f);
  }
  return n;
}

void flip_byte(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
  b ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

bool dir_accepts_o_direct(const std::string& dir) {
  const std::string path = dir + "/probe";
  const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0600);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path.c_str());
  }
  return fd >= 0;
}

class SsdTierTest : public ::testing::Test {
 protected:
  SsdConfig config() const {
    SsdConfig c;
    c.dir = tmp_.path() + "/ssd";
    c.segment_bytes = 1ull << 20;
    return c;
  }

  std::unique_ptr<SsdTier> open(const SsdConfig& c, SsdTier::ProtectedFn is_protected = {},
                                SsdTierHooks hooks = {}) {
    hooks.wall_clock = &wall_;
    auto r = SsdTier::open(c, clock_, std::move(is_protected), std::move(hooks));
    EXPECT_TRUE(r) << r.error().message;
    return r ? std::move(r.value()) : nullptr;
  }

  // Opens and waits for the start-up scan to finish.
  std::unique_ptr<SsdTier> open_scanned(const SsdConfig& c, SsdTier::ProtectedFn is_protected = {}) {
    auto t = open(c, std::move(is_protected));
    if (t) {
      EXPECT_TRUE(cgn::testing::wait_until([&] { return t->stats().scan_complete; }, 60s));
    }
    return t;
  }

  static std::vector<uint8_t> read_back(SsdTier& t, const BlockKey& k) {
    const auto n = t.length(k);
    if (!n) {
      return {};
    }
    std::vector<uint8_t> out(*n);
    auto r = t.read(k, out);
    EXPECT_TRUE(r) << r.error().message;
    return out;
  }

  cgn::testing::TempDir tmp_;
  ManualClock clock_{1'000};
  ManualClock wall_{kWallStart};
};

class SsdTierRoundTrip : public SsdTierTest, public ::testing::WithParamInterface<DirectIo> {};

TEST_P(SsdTierRoundTrip, EverySizeReadsBackIntoAlignedAndUnalignedBuffers) {
  SsdConfig c = config();
  c.segment_bytes = 64ull << 20;
  c.direct_io = GetParam();
  auto t = open(c);
  ASSERT_TRUE(t);
  const std::vector<size_t> sizes = {1, 4095, 4096, 4097, 1u << 20, 16u << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto v = value_of(sizes[i], static_cast<int>(i));
    // From an unaligned vector and from a page-aligned buffer (written in place under O_DIRECT).
    ASSERT_TRUE(t->write(key_of(static_cast<int>(i)), v)) << sizes[i];
    Aligned src(sizes[i]);
    std::memcpy(src.p, v.data(), v.size());
    ASSERT_TRUE(t->write(key_of(100 + static_cast<int>(i)), src.span())) << sizes[i];
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto v = value_of(sizes[i], static_cast<int>(i));
    for (int k : {static_cast<int>(i), 100 + static_cast<int>(i)}) {
      EXPECT_EQ(t->length(key_of(k)), sizes[i]);
      Aligned aligned(sizes[i]);
      auto r = t->read(key_of(k), aligned.span());
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_EQ(*r, sizes[i]);
      EXPECT_TRUE(std::equal(v.begin(), v.end(), aligned.p)) << "aligned read of " << sizes[i];
      std::vector<uint8_t> unaligned(sizes[i] + 1);
      auto u = t->read(key_of(k), std::span<uint8_t>(unaligned).subspan(1));
      ASSERT_TRUE(u) << u.error().message;
      EXPECT_TRUE(std::equal(v.begin(), v.end(), unaligned.begin() + 1)) << "unaligned read of " << sizes[i];
    }
  }
  const SsdStats s = t->stats();
  EXPECT_EQ(s.blocks, 2 * sizes.size());
  EXPECT_EQ(s.bytes, file_bytes(c.dir));
  EXPECT_EQ(s.checksum_failures, 0u);
}

INSTANTIATE_TEST_SUITE_P(DirectIoModes, SsdTierRoundTrip, ::testing::Values(DirectIo::kOff, DirectIo::kAuto),
                         [](const auto& info) { return info.param == DirectIo::kOff ? "buffered" : "auto"; });

TEST_F(SsdTierTest, DirectIoOnUsesODirectWhereTheFilesystemAcceptsIt) {
  CGN_REQUIRE_CAPABILITY(dir_accepts_o_direct(tmp_.path()), "O_DIRECT on " << tmp_.path());
  SsdConfig c = config();
  c.direct_io = DirectIo::kOn;
  auto t = open(c);
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->stats().direct_io);
  const auto v = value_of(10000, 1);
  ASSERT_TRUE(t->write(key_of(1), v));
  EXPECT_EQ(read_back(*t, key_of(1)), v);
}

TEST_F(SsdTierTest, DirectIoOffUsesBufferedIo) {
  SsdConfig c = config();
  c.direct_io = DirectIo::kOff;
  auto t = open(c);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->stats().direct_io);
}

TEST_F(SsdTierTest, BadConfigIsRefusedWithTheField) {
  SsdConfig c = config();
  c.segment_bytes = 100;
  auto r = SsdTier::open(c, clock_, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, StoreError::kConfig);
  EXPECT_NE(r.error().message.find("ssd.segment_bytes"), std::string::npos);

  c = config();
  c.dir = tmp_.file("a-file");
  cgn::testing::write_file(c.dir, "x");
  r = SsdTier::open(c, clock_, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, StoreError::kConfig);
  EXPECT_NE(r.error().message.find(c.dir), std::string::npos) << r.error().message;
}

TEST_F(SsdTierTest, EraseAndLookups) {
  auto t = open(config());
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->contains(key_of(1)));
  EXPECT_EQ(t->read(key_of(1), {}).error().code, StoreError::kNotFound);
  ASSERT_TRUE(t->write(key_of(1), value_of(5000, 1)));
  EXPECT_TRUE(t->contains(key_of(1)));
  EXPECT_EQ(t->length(key_of(1)), 5000u);
  std::vector<uint8_t> small(4999);
  EXPECT_EQ(t->read(key_of(1), small).error().code, StoreError::kTooLarge);
  t->erase(key_of(1));
  EXPECT_FALSE(t->contains(key_of(1)));
  EXPECT_FALSE(t->length(key_of(1)));
  EXPECT_EQ(t->read(key_of(1), small).error().code, StoreError::kNotFound);
  EXPECT_EQ(t->stats().blocks, 0u);
  EXPECT_EQ(t->stats().bytes, 0u);
}

TEST_F(SsdTierTest, ValueOverTheRecordLimitIsTooLarge) {
  const size_t n = kMaxValueBytes + 1;
  void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto t = open(config());
  ASSERT_TRUE(t);
  auto r = t->write(key_of(1), std::span<const uint8_t>(static_cast<const uint8_t*>(p), n));
  ::munmap(p, n);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, StoreError::kTooLarge);
  EXPECT_TRUE(segment_files(config().dir).empty() || file_bytes(config().dir) == 0);
}

TEST_F(SsdTierTest, ReopenBringsBackEveryRecordAndWritesToANewSegment) {
  SsdConfig c = config();
  c.segment_bytes = 64 << 10;
  std::vector<std::vector<uint8_t>> values;
  {
    auto t = open(c);
    ASSERT_TRUE(t);
    for (int i = 0; i < 40; ++i) {
      values.push_back(value_of(1 + static_cast<size_t>(i) * 499, i));
      ASSERT_TRUE(t->write(key_of(i), values.back()));
    }
  }
  const auto files = segment_files(c.dir);
  ASSERT_GE(files.size(), 5u);
  std::vector<uint64_t> sizes;
  for (const auto& f : files) {
    sizes.push_back(fs::file_size(f));
  }
  auto t = open_scanned(c);
  ASSERT_TRUE(t);
  const SsdStats s = t->stats();
  EXPECT_EQ(s.blocks, 40u);
  EXPECT_EQ(s.scan_bytes_total, file_bytes(c.dir));
  EXPECT_EQ(s.scan_bytes_done, s.scan_bytes_total);
  EXPECT_EQ(s.torn_tails, 0u);
  EXPECT_EQ(s.checksum_failures, 0u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(read_back(*t, key_of(i)), values[static_cast<size_t>(i)]) << i;
  }
  ASSERT_TRUE(t->write(key_of(99), value_of(100, 99)));
  const auto after = segment_files(c.dir);
  ASSERT_EQ(after.size(), files.size() + 1);
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(fs::file_size(files[i]), sizes[i]) << "an old segment was appended to: " << files[i];
  }
}

// Blocks the scan before segments from `from` on until released (or destroyed).
class ScanGate {
 public:
  explicit ScanGate(uint64_t from) : from_(from) {}
  ~ScanGate() { release(); }
  void release() {
    std::lock_guard l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait(uint64_t id) {
    if (id < from_) {
      return;
    }
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return open_; });
  }

 private:
  uint64_t from_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST_F(SsdTierTest, LookupsAreAnsweredWhileTheScanRuns) {
  SsdConfig c = config();
  c.segment_bytes = 16 << 10;  // one 8000-byte record (12 KiB) per segment
  std::vector<std::vector<uint8_t>> values;
  {
    auto t = open(c);
    ASSERT_TRUE(t);
    for (int i = 0; i < 6; ++i) {
      values.push_back(value_of(8000, i));
      ASSERT_TRUE(t->write(key_of(i), values.back()));
    }
  }
  const auto files = segment_files(c.dir);
  ASSERT_EQ(files.size(), 6u);
  const uint64_t third = *parse_segment_name(fs::path(files[2]).filename().string());
  SsdTierHooks hooks;
  auto gate = std::make_shared<ScanGate>(third);
  hooks.before_segment_scan = [gate](uint64_t id) { gate->wait(id); };
  auto t = open(c, {}, hooks);
  ASSERT_TRUE(t);
  std::shared_ptr<ScanGate> release_first(gate.get(), [](ScanGate* g) { g->release(); });  // before ~t
  ASSERT_TRUE(cgn::testing::wait_until([&] { return t->contains(key_of(1)); }, 60s));
  SsdStats s = t->stats();
  EXPECT_FALSE(s.scan_complete);
  EXPECT_LT(s.scan_bytes_done, s.scan_bytes_total);
  EXPECT_TRUE(t->contains(key_of(0)));
  EXPECT_EQ(read_back(*t, key_of(0)), values[0]);
  EXPECT_FALSE(t->contains(key_of(5)));
  // A write during the scan goes to a new segment and is served at once.
  ASSERT_TRUE(t->write(key_of(50), value_of(300, 50)));
  EXPECT_EQ(read_back(*t, key_of(50)), value_of(300, 50));
  gate->release();
  ASSERT_TRUE(cgn::testing::wait_until([&] { return t->stats().scan_complete; }, 60s));
  s = t->stats();
  EXPECT_EQ(s.scan_bytes_done, s.scan_bytes_total);
  EXPECT_EQ(s.blocks, 7u);
  EXPECT_EQ(read_back(*t, key_of(5)), values[5]);
}

// Three records in one segment, at offsets 0, 12288 and 24576.
std::vector<std::vector<uint8_t>> write_three(SsdTier& t) {
  std::vector<std::vector<uint8_t>> v = {value_of(5000, 0), value_of(5000, 1), value_of(9000, 2)};
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(t.write(key_of(i), v[static_cast<size_t>(i)]));
  }
  return v;
}
constexpr uint64_t kThirdRecord = 2 * record_bytes(5000);

class SsdTierTornTail : public SsdTierTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(SsdTierTornTail, IsCutAndTheCompleteRecordsComeBack) {
  const SsdConfig c = config();
  std::vector<std::vector<uint8_t>> v;
  {
    auto t = open(c);
    ASSERT_TRUE(t);
    v = write_three(*t);
  }
  const auto files = segment_files(c.dir);
  ASSERT_EQ(files.size(), 1u);
  ASSERT_EQ(kThirdRecord, 24576u);
  fs::resize_file(files[0], kThirdRecord + GetParam());
  auto t = open_scanned(c);
  ASSERT_TRUE(t);
  EXPECT_EQ(read_back(*t, key_of(0)), v[0]);
  EXPECT_EQ(read_back(*t, key_of(1)), v[1]);
  EXPECT_FALSE(t->contains(key_of(2)));
  const SsdStats s = t->stats();
  EXPECT_EQ(s.torn_tails, 1u);
  EXPECT_EQ(s.blocks, 2u);
  EXPECT_EQ(fs::file_size(files[0]), kThirdRecord);
}

INSTANTIATE_TEST_SUITE_P(Cuts, SsdTierTornTail, ::testing::Values(100, 4096 + 1000, 4096 + 8192 + 100),
                         [](const auto& info) {
                           return info.param < 4096    ? "mid_header"
                                  : info.param < 12288 ? "mid_value"
                                                       : "mid_padding";
                         });

TEST_F(SsdTierTest, FlippedValueByteIsNeverServed) {
  const SsdConfig c = config();
  std::vector<std::vector<uint8_t>> v;
  std::string file;
  {
    auto t = open(c);
    ASSERT_TRUE(t);
    v = write_three(*t);
    file = segment_files(c.dir).at(0);
    flip_byte(file, record_bytes(5000) + kSegmentPage + 4321);  // inside the second value
    std::vector<uint8_t> out(5000);
    auto r = t->read(key_of(1), out);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, StoreError::kCorrupt);
    EXPECT_NE(r.error().message.find("checksum"), std::string::npos) << r.error().message;
    EXPECT_FALSE(t->contains(key_of(1)));
    EXPECT_EQ(t->read(key_of(1), out).error().code, StoreError::kNotFound);
    EXPECT_EQ(t->stats().checksum_failures, 1u);
    EXPECT_EQ(read_back(*t, key_of(2)), v[2]);
  }
  auto t = open_scanned(c);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->contains(key_of(1)));
  EXPECT_EQ(t->stats().checksum_failures, 1u);
  EXPECT_EQ(read_back(*t, key_of(0)), v[0]);
  EXPECT_EQ(read_back(*t, key_of(2)), v[2]);
}

TEST_F(SsdTierTest, FlippedHeaderByteSkipsOnlyThatRecord) {
  const SsdConfig c = config();
  std::vector<std::vector<uint8_t>> v;
  {
    auto t = open(c);
    ASSERT_TRUE(t);
    v = write_three(*t);
  }
  flip_byte(segment_files(c.dir).at(0), record_bytes(5000) + 20);  // the second record's key
  auto t = open_scanned(c);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->contains(key_of(1)));
  EXPECT_EQ(read_back(*t, key_of(0)), v[0]);
  EXPECT_EQ(read_back(*t, key_of(2)), v[2]);
  const SsdStats s = t->stats();
  EXPECT_EQ(s.checksum_failures, 1u);
  EXPECT_EQ(s.torn_tails, 0u);
}

TEST_F(SsdTierTest, LaterWriteOfAKeyWinsAfterReopen) {
  SsdConfig c = config();
  c.segment_bytes = 16 << 10;  // one record per segment: versions land in different segments too
  {
    auto t = open(c);
    ASSERT_TRUE(t);
    ASSERT_TRUE(t->write(key_of(1), value_of(6000, 1)));
    ASSERT_TRUE(t->write(key_of(2), value_of(100, 20)));
    ASSERT_TRUE(t->write(key_of(2), value_of(200, 21)));  // same segment as the first version
    ASSERT_TRUE(t->write(key_of(1), value_of(7000, 2)));
  }
  {
    auto t = open_scanned(c);
    ASSERT_TRUE(t);
    EXPECT_EQ(read_back(*t, key_of(1)), value_of(7000, 2));
    EXPECT_EQ(read_back(*t, key_of(2)), value_of(200, 21));
    EXPECT_EQ(t->stats().blocks, 2u);
    ASSERT_TRUE(t->write(key_of(1), value_of(3000, 3)));
  }
  auto t = open_scanned(c);
  ASSERT_TRUE(t);
  EXPECT_EQ(read_back(*t, key_of(1)), value_of(3000, 3));
}

TEST_F(SsdTierTest, TtlExpiresRecordsWhileRunning) {
  SsdConfig c = config();
  c.segment_bytes = 16 << 10;
  c.ttl = 10 * kNanosPerSecond;
  auto t = open(c);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->write(key_of(1), value_of(8000, 1)));
  clock_.advance(5 * kNanosPerSecond);
  ASSERT_TRUE(t->write(key_of(2), value_of(8000, 2)));  // a second segment
  ASSERT_EQ(segment_files(c.dir).size(), 2u);
  t->maintain();
  EXPECT_TRUE(t->contains(key_of(1)));
  clock_.advance(6 * kNanosPerSecond);
  t->maintain();
  EXPECT_FALSE(t->contains(key_of(1)));
  EXPECT_TRUE(t->contains(key_of(2)));
  EXPECT_EQ(t->stats().ttl_expiries, 1u);
  // The first segment held only the expired record: deleted; the active one stays.
  EXPECT_EQ(segment_files(c.dir).size(), 1u);
  EXPECT_EQ(t->stats().segments, 1u);
  clock_.advance(5 * kNanosPerSecond);
  t->maintain();
  EXPECT_FALSE(t->contains(key_of(2)));
  EXPECT_EQ(t->stats().ttl_expiries, 2u);
  EXPECT_EQ(segment_files(c.dir).size(), 1u);
}

TEST_F(SsdTierTest, TtlCountsTheAgeAcrossARestartByTheStoredWallTime) {
  SsdConfig c = config();
  c.ttl = 10 * kNanosPerSecond;
  {
    auto t = open(c);
    ASSERT_TRUE(t);
    ASSERT_TRUE(t->write(key_of(1), value_of(100, 1)));
    wall_.advance(8 * kNanosPerSecond);
    ASSERT_TRUE(t->write(key_of(2), value_of(100, 2)));
  }
  wall_.advance(4 * kNanosPerSecond);  // down for 4 s: ages 12 s and 4 s
  auto t = open_scanned(c);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->contains(key_of(1)));
  EXPECT_TRUE(t->contains(key_of(2)));
  EXPECT_EQ(t->stats().ttl_expiries, 1u);
  clock_.advance(5 * kNanosPerSecond);  // age 9 s
  t->maintain();
  EXPECT_TRUE(t->contains(key_of(2)));
  clock_.advance(2 * kNanosPerSecond);  // age 11 s
  t->maintain();
  EXPECT_FALSE(t->contains(key_of(2)));
  EXPECT_EQ(t->stats().ttl_expiries, 2u);
}

TEST_F(SsdTierTest, OverMaxBytesTheOldestUnprotectedSegmentIsEvicted) {
  SsdConfig c = config();
  const uint64_t rec = record_bytes(8000);  // 12 KiB
  c.segment_bytes = 2 * rec;
  c.max_bytes = 6 * rec;
  std::atomic<bool> protect_all{false};
  auto t = open(c, [&](const BlockKey& k) { return protect_all.load() || k == key_of(0); });
  ASSERT_TRUE(t);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(t->write(key_of(i), value_of(8000, i)));
  }
  const auto files = segment_files(c.dir);
  ASSERT_EQ(files.size(), 3u);
  ASSERT_TRUE(t->write(key_of(6), value_of(8000, 6)));
  // The first segment (keys 0, 1) holds the protected key 0: the second (keys 2, 3) goes.
  for (int i : {0, 1, 4, 5, 6}) {
    EXPECT_TRUE(t->contains(key_of(i))) << i;
  }
  EXPECT_FALSE(t->contains(key_of(2)));
  EXPECT_FALSE(t->contains(key_of(3)));
  EXPECT_TRUE(fs::exists(files[0]));
  EXPECT_FALSE(fs::exists(files[1]));
  EXPECT_EQ(t->stats().evictions, 2u);
  EXPECT_LE(file_bytes(c.dir), c.max_bytes);

  protect_all = true;
  ASSERT_TRUE(t->write(key_of(7), value_of(8000, 7)));  // fits exactly
  auto r = t->write(key_of(8), value_of(8000, 8));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, StoreError::kDiskFull);
  EXPECT_NE(r.error().message.find("ssd.max_bytes"), std::string::npos) << r.error().message;
  EXPECT_FALSE(t->contains(key_of(8)));
  EXPECT_EQ(t->stats().last_error, r.error().message);
  EXPECT_EQ(t->stats().write_errors, 1u);
  EXPECT_LE(file_bytes(c.dir), c.max_bytes);

  protect_all = false;
  ASSERT_TRUE(t->write(key_of(8), value_of(8000, 8)));
  EXPECT_TRUE(t->stats().last_error.empty());
  EXPECT_TRUE(t->contains(key_of(0)));

  auto big = t->write(key_of(9), value_of(7 * rec, 9));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, StoreError::kDiskFull);
}

TEST_F(SsdTierTest, MaintainDeletesSegmentsWhoseRecordsAreAllReplaced) {
  SsdConfig c = config();
  c.segment_bytes = 2 * record_bytes(8000);
  auto t = open(c);
  ASSERT_TRUE(t);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(t->write(key_of(i), value_of(8000, i)));
    }
  }
  ASSERT_EQ(segment_files(c.dir).size(), 3u);
  t->maintain();
  EXPECT_EQ(segment_files(c.dir).size(), 1u);
  EXPECT_EQ(t->stats().segments, 1u);
  EXPECT_EQ(t->stats().evictions, 0u);
  EXPECT_EQ(read_back(*t, key_of(1)), value_of(8000, 1));
}

TEST_F(SsdTierTest, ConcurrentReadersNeverSeeABadValue) {
  SsdConfig c = config();
  c.segment_bytes = 256 << 10;
  c.max_bytes = 2 << 20;  // evictions run under the readers
  auto t = open(c);
  ASSERT_TRUE(t);
  constexpr int kKeys = 64;
  auto size_of = [](int k) { return static_cast<size_t>(1000 + k * 997); };
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::atomic<int> hits{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      std::vector<uint8_t> out(1 << 20);
      for (int i = 0; !done.load(); ++i) {
        const int k = (i * 7 + r) % kKeys;
        auto got = t->read(key_of(k), out);
        if (got) {
          hits.fetch_add(1);
          const auto want = value_of(size_of(k), k);
          if (*got != want.size() || !std::equal(want.begin(), want.end(), out.begin())) {
            bad.fetch_add(1);
          }
        } else if (got.error().code != StoreError::kNotFound) {
          bad.fetch_add(1);
        }
      }
    });
  }
  for (int round = 0; round < 20; ++round) {
    for (int k = 0; k < kKeys; ++k) {
      ASSERT_TRUE(t->write(key_of(k), value_of(size_of(k), k)));
    }
  }
  done = true;
  for (auto& th : readers) {
    th.join();
  }
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(hits.load(), 0);
  EXPECT_GT(t->stats().evictions, 0u);
  EXPECT_EQ(t->stats().checksum_failures, 0u);
}

// Runs `body` in a child process inside a private mount namespace with a 4 MiB tmpfs mounted on
// `dir`. Returns "" when the body passed, "skip: <why>" when the namespace or the mount was
// refused, else the body's failure.
std::string in_small_filesystem(const std::string& dir,
                                const std::function<std::string(const std::string&)>& body) {
  int fds[2];
  if (::pipe(fds) != 0) {
    return std::string("pipe: ") + std::strerror(errno);
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto report = [&](const std::string& msg) {
      const ssize_t n = ::write(fds[1], msg.data(), msg.size());
      ::_exit(n == static_cast<ssize_t>(msg.size()) ? 0 : 1);
    };
    if (::unshare(CLONE_NEWNS) != 0) {
      report(std::string("skip: unshare(CLONE_NEWNS): ") + std::strerror(errno));
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      report(std::string("skip: making / private: ") + std::strerror(errno));
    }
    if (::mount("cgn-test", dir.c_str(), "tmpfs", 0, "size=4m") != 0) {
      report(std::string("skip: mounting a 4 MiB tmpfs: ") + std::strerror(errno));
    }
    report(body(dir));
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) {
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "the child process failed (status " + std::to_string(status) + "): " + out;
  }
  return out;
}

TEST_F(SsdTierTest, FullFilesystemGivesDiskFullAndKeepsServing) {
  const std::string mnt = tmp_.file("small-fs");
  fs::create_directories(mnt);
  const std::string result = in_small_filesystem(mnt, [&](const std::string& root) -> std::string {
    SsdConfig c;
    c.dir = root + "/ssd";
    c.segment_bytes = 1 << 20;
    auto opened = SsdTier::open(c, clock_, {});
    if (!opened) {
      return "open: " + opened.error().message;
    }
    auto& t = *opened.value();
    const size_t kValue = 64 << 10;
    int written = 0;
    Error<StoreError> err;
    for (; written < 200; ++written) {
      auto r = t.write(key_of(written), value_of(kValue, written));
      if (!r) {
        err = r.error();
        break;
      }
    }
    if (written == 200 || written < 10) {
      return "expected the 4 MiB filesystem to fill after 10..200 writes, got " + std::to_string(written);
    }
    if (err.code != StoreError::kDiskFull ||
        err.message.find("no space left on device") == std::string::npos ||
        err.message.find(c.dir) == std::string::npos) {
      return "unexpected error (" + std::string(to_string(err.code)) + "): " + err.message;
    }
    const SsdStats s = t.stats();
    if (s.last_error != err.message || s.write_errors != 1) {
      return "stats do not say so: last_error=" + s.last_error;
    }
    if (t.contains(key_of(written))) {
      return "the failed write is visible";
    }
    if (s.bytes != file_bytes(c.dir)) {
      return "a partial record stayed in the segment: " + std::to_string(file_bytes(c.dir)) +
             " file bytes, " + std::to_string(s.bytes) + " indexed";
    }
    if (t.write(key_of(written), value_of(kValue, written)).error().code != StoreError::kDiskFull) {
      return "a second write did not fail the same way";
    }
    std::vector<uint8_t> out(kValue);
    for (int i = 0; i < written; ++i) {
      auto r = t.read(key_of(i), out);
      if (!r || out != value_of(kValue, i)) {
        return "record " + std::to_string(i) + " does not read back after the disk filled";
      }
    }
    opened.value().reset();
    auto again = SsdTier::open(c, clock_, {});
    if (!again) {
      return "reopen: " + again.error().message;
    }
    if (!cgn::testing::wait_until([&] { return again.value()->stats().scan_complete; }, 60s)) {
      return "the scan did not finish";
    }
    const SsdStats s2 = again.value()->stats();
    if (s2.blocks != static_cast<uint64_t>(written) || s2.torn_tails != 0 || s2.checksum_failures != 0) {
      return "after reopen: " + std::to_string(s2.blocks) + " records, " + std::to_string(s2.torn_tails) +
             " torn tails, " + std::to_string(s2.checksum_failures) + " checksum failures";
    }
    return "";
  });
  if (result.starts_with("skip: ")) {
    CGN_REQUIRE_CAPABILITY(false, "a private mount namespace with a tmpfs (" << result.substr(6) << ")");
  }
  EXPECT_EQ(result, "");
}

}  // namespace
}  // namespace cgn::kvcache
