// cgn-kvcached with its SSD tier, as real processes over real segment files: kill -9 during a
// write burst and a restart on the same directory (every block that was on SSD is back, no torn
// block is served), a flipped byte at rest and while running (never served, counted), a disk
// that fills up (spilling stops with a clear error, RAM keeps serving), TTL expiry, two processes
// agreeing on keys, and a lease that holds across an eviction storm.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "kvcached/kv_client.h"
#include "kvcached/kvcached_itest_util.h"
#include "kvcached/local_client.h"
#include "testing/metrics_page.h"

namespace cgn::kvcached {
namespace {

using namespace itest;
using testing::TempDir;
namespace fs = std::filesystem;

constexpr size_t kBlock = 64 << 10;

// 4 MiB of RAM (64 blocks of 64 KiB) that spills early, over an SSD tier in `ssd`.
std::string small_ram(const std::string& ssd, const std::string& more = "") {
  return "ram_bytes = 4194304\nmax_block_bytes = 1048576\nhigh_watermark = 0.5\nspill_fraction = 0.25\n"
         "ssd_segment_bytes = 1048576\n" +
         (ssd.empty() ? std::string() : "ssd_dir = \"" + ssd + "\"\n") + more;
}

std::unique_ptr<KvClient> client_of(const Daemon& d) {
  auto c = KvClient::connect(d.target(), {});
  EXPECT_TRUE(c.ok());
  return c.ok() ? std::move(*c) : nullptr;
}

kvcache::Tier tier_of(KvClient& c, const Digest& d) {
  auto r = c.batch_lookup(test_ns(), {{d}}, 0);
  return r.ok() && !r->runs[0].empty() ? r->runs[0][0] : kvcache::Tier::kNone;
}

// A seed no other block of the test uses.
uint64_t fresh_seed() {
  static std::atomic<uint64_t> next{1000};
  return next++;
}

// Puts `n` new filler blocks so that earlier blocks leave RAM.
void fill(KvClient& c, int n, uint64_t seed = fresh_seed()) {
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(c.put(test_ns(), digest_of(seed, i), block_bytes(seed, i, kBlock)).ok());
  }
}

// Puts block (seed, 0), then fills RAM until the block is on SSD only.
void put_onto_ssd(KvClient& c, uint64_t seed) {
  ASSERT_TRUE(c.put(test_ns(), digest_of(seed, 0), block_bytes(seed, 0, kBlock)).ok());
  ASSERT_TRUE(testing::wait_until(
      [&] {
        if (tier_of(c, digest_of(seed, 0)) == kvcache::Tier::kSsd) {
          return true;
        }
        fill(c, 16);
        return false;
      },
      60s, 1ms))
      << "the block never reached the SSD tier";
}

bool scan_complete(KvClient& c) {
  auto s = c.stats();
  return s.ok() && s->scan_complete;
}

// The offset of `needle` in the segment files under `dir` (path, offset); empty path when absent.
std::pair<std::string, uint64_t> find_in_segments(const std::string& dir,
                                                  const std::vector<uint8_t>& needle) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string data = testing::read_file(e.path().string());
    const auto at = data.find(std::string(needle.begin(), needle.end()));
    if (at != std::string::npos) {
      return {e.path().string(), at};
    }
  }
  return {"", 0};
}

void flip_byte(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
  b ^= 0x40;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
  ::fsync(fd);
  ::close(fd);
}

double checksum_failures(const Daemon& d) {
  return testing::metric(scrape(d.metrics_port()), "cgn_kvcached_checksum_failures_total");
}

TEST(KvcachedSsd, KillNineDuringAWriteBurstLosesNoSpilledBlockAndServesNoTornOne) {
  TempDir dir;
  const std::string ssd = dir.file("ssd");
  Daemon d(dir, "kv", small_ram(ssd));
  ASSERT_TRUE(d.start());
  auto c = client_of(d);
  std::mutex mu;
  std::vector<Digest> acked;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      for (uint64_t i = 0; i < 2000 && !stop.load(); ++i) {
        const Digest dg = digest_of(20 + w, i);
        if (!c->put(test_ns(), dg, block_bytes(20 + w, i, kBlock)).ok()) {
          return;  // the daemon died
        }
        const std::lock_guard lock(mu);
        acked.push_back(dg);
      }
    });
  }
  uint64_t on_ssd = 0;
  ASSERT_TRUE(testing::wait_until(
      [&] {
        auto s = c->stats();
        on_ssd = s.ok() ? s->ssd.blocks : 0;
        return on_ssd >= 40;
      },
      60s));
  d.kill9();  // the writers are still writing
  stop = true;
  for (auto& t : writers) {
    t.join();
  }
  ASSERT_LT(acked.size(), 4000u) << "the kill came after the burst, not during it";
  ASSERT_TRUE(d.start());
  c = client_of(d);
  ASSERT_TRUE(testing::wait_until([&] { return scan_complete(*c); }, 60s));
  auto after = c->stats();
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->ssd.blocks, on_ssd) << "every block Stats counted on SSD before the kill is back";
  size_t found = 0;
  for (const Digest& dg : acked) {
    auto g = c->get(test_ns(), dg);
    if (!g.ok()) {
      EXPECT_EQ(g.error().code, ClientError::kNotFound) << g.error().message;  // was only in RAM
      continue;
    }
    ++found;
    const uint64_t seed = dg[0];
    uint64_t i = 0;
    std::memcpy(&i, dg.data() + 8, 8);
    EXPECT_EQ(*g, block_bytes(seed, i, kBlock)) << "a block came back with the wrong bytes";
  }
  EXPECT_GE(found, on_ssd);
  EXPECT_EQ(after->checksum_failures, 0u);
}

TEST(KvcachedSsd, AFlippedByteAtRestIsNeverServedAndIsCounted) {
  TempDir dir;
  const std::string ssd = dir.file("ssd");
  Daemon d(dir, "kv", small_ram(ssd));
  ASSERT_TRUE(d.start());
  auto c = client_of(d);
  put_onto_ssd(*c, 31);
  ASSERT_TRUE(c->put(test_ns(), digest_of(32, 0), block_bytes(32, 0, kBlock)).ok());
  put_onto_ssd(*c, 33);  // a second spilled block, left intact
  EXPECT_EQ(d.stop(), 0);
  const auto block31 = block_bytes(31, 0, kBlock);
  const auto [path, at] = find_in_segments(ssd, std::vector<uint8_t>(block31.begin(), block31.begin() + 64));
  ASSERT_FALSE(path.empty()) << "block 31 is in no segment file";
  flip_byte(path, at + 1000);

  ASSERT_TRUE(d.start());
  c = client_of(d);
  ASSERT_TRUE(testing::wait_until([&] { return scan_complete(*c); }, 60s));
  auto g = c->get(test_ns(), digest_of(31, 0));
  ASSERT_FALSE(g.ok()) << "a damaged block was served";
  EXPECT_EQ(g.error().code, ClientError::kNotFound);
  EXPECT_TRUE(testing::wait_until([&] { return checksum_failures(d) == 1.0; }, 10s))
      << scrape(d.metrics_port());
  auto intact = c->get(test_ns(), digest_of(33, 0));
  ASSERT_TRUE(intact.ok()) << intact.error().message;
  EXPECT_EQ(*intact, block_bytes(33, 0, kBlock));
}

TEST(KvcachedSsd, AFlippedByteWhileRunningIsNeverServedAndIsCounted) {
  TempDir dir;
  const std::string ssd = dir.file("ssd");
  Daemon d(dir, "kv", small_ram(ssd));
  ASSERT_TRUE(d.start());
  auto c = client_of(d);
  put_onto_ssd(*c, 41);
  const auto bytes = block_bytes(41, 0, kBlock);
  const auto [path, at] = find_in_segments(ssd, std::vector<uint8_t>(bytes.begin(), bytes.begin() + 64));
  ASSERT_FALSE(path.empty());
  flip_byte(path, at + 2000);
  auto g = c->get(test_ns(), digest_of(41, 0));
  ASSERT_FALSE(g.ok()) << "a damaged block was served";
  EXPECT_EQ(g.error().code, ClientError::kNotFound);
  EXPECT_TRUE(testing::wait_until([&] { return checksum_failures(d) == 1.0; }, 10s));
  // Dropped, not retried: the next read misses too, and counts nothing more.
  EXPECT_FALSE(c->get(test_ns(), digest_of(41, 0)).ok());
  EXPECT_EQ(checksum_failures(d), 1.0);
}

TEST(KvcachedSsd, TtlExpiresSsdRecords) {
  TempDir dir;
  const std::string ssd = dir.file("ssd");
  Daemon d(dir, "kv", small_ram(ssd, "ssd_ttl_s = 1\n"));
  ASSERT_TRUE(d.start());
  auto c = client_of(d);
  put_onto_ssd(*c, 51);
  EXPECT_TRUE(testing::wait_until(
      [&] {
        auto s = c->stats();
        return s.ok() && s->ttl_expiries > 0 && tier_of(*c, digest_of(51, 0)) == kvcache::Tier::kNone;
      },
      30s, 100ms));
  auto g = c->get(test_ns(), digest_of(51, 0));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, ClientError::kNotFound);
  EXPECT_GE(testing::metric(scrape(d.metrics_port()), "cgn_kvcached_ttl_expiries_total"), 1.0);
}

TEST(KvcachedSsd, TwoProcessesDeriveTheSameKeys) {
  TempDir dir;
  const std::string ssd = dir.file("ssd");
  {
    Daemon a(dir, "a", small_ram(ssd));
    ASSERT_TRUE(a.start());
    auto c = client_of(a);
    put_onto_ssd(*c, 61);
    EXPECT_EQ(a.stop(), 0);
  }
  Daemon b(dir, "b", small_ram(ssd));
  ASSERT_TRUE(b.start());
  auto c = client_of(b);
  ASSERT_TRUE(testing::wait_until([&] { return scan_complete(*c); }, 60s));
  // Another process finds the block by namespace and digest...
  auto g = c->get(test_ns(), digest_of(61, 0));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(*g, block_bytes(61, 0, kBlock));
  // ...and so does this one, deriving the key itself (the fast path).
  auto lc = LocalClient::connect(b.socket());
  ASSERT_TRUE(lc.ok()) << lc.error().message;
  auto v = (*lc)->view(key_of(digest_of(61, 0)));
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(std::ranges::equal(v->data(), block_bytes(61, 0, kBlock)));
}

TEST(KvcachedSsd, ALeaseHoldsAcrossAnEvictionStorm) {
  TempDir dir;
  Daemon d(dir, "kv", small_ram(""));  // RAM only: eviction drops blocks
  ASSERT_TRUE(d.start());
  auto c = client_of(d);
  std::vector<Digest> leased;
  for (int i = 0; i < 8; ++i) {
    leased.push_back(digest_of(71, i));
    ASSERT_TRUE(c->put(test_ns(), leased.back(), block_bytes(71, i, kBlock)).ok());
  }
  ASSERT_TRUE(c->put(test_ns(), digest_of(72, 0), block_bytes(72, 0, kBlock)).ok());  // not leased
  auto lk = c->batch_lookup(test_ns(), {leased}, 30000);
  ASSERT_TRUE(lk.ok()) << lk.error().message;
  ASSERT_EQ(lk->runs[0].size(), leased.size());
  fill(*c, 400);  // 25 MiB through a 4 MiB arena
  auto evicted = c->get(test_ns(), digest_of(72, 0));
  ASSERT_FALSE(evicted.ok()) << "the storm did not evict an unleased block";
  for (int i = 0; i < 8; ++i) {
    auto g = c->get(test_ns(), leased[static_cast<size_t>(i)]);
    ASSERT_TRUE(g.ok()) << "leased block " << i << ": " << g.error().message;
    EXPECT_EQ(*g, block_bytes(71, i, kBlock));
  }
  auto s = c->stats();
  ASSERT_TRUE(s.ok());
  EXPECT_GT(s->ram.evictions, 300u);
}

// Whether this machine lets a private mount namespace mount a tmpfs.
bool can_mount_tmpfs(const std::string& dir) {
  const std::string cmd = "unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs " + dir + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(KvcachedSsd, AFullDiskStopsSpillingWithAClearErrorWhileRamKeepsServing) {
  TempDir dir;
  const std::string ssd = dir.file("ssd");
  fs::create_directories(ssd);
  if (!can_mount_tmpfs(ssd)) {
    GTEST_SKIP() << "mounting a tmpfs in a private mount namespace (unshare -m) is refused here";
  }
  // The daemon sees a 1 MiB tmpfs on ssd_dir, in its own mount namespace.
  Daemon d(dir, "kv", small_ram(ssd, "direct_io = \"auto\"\n"), "",
           {"unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs \"$0\" && exec \"$@\"", ssd});
  ASSERT_TRUE(d.start());
  auto c = client_of(d);
  std::string error;
  ASSERT_TRUE(testing::wait_until(
      [&] {
        fill(*c, 8);
        auto s = c->stats();
        error = s.ok() ? s->ssd_error : "";
        return !error.empty();
      },
      60s, 1ms))
      << [&] {
           auto s = c->stats();
           return s.ok() ? "ssd blocks " + std::to_string(s->ssd.blocks) + ", spilled " +
                               std::to_string(s->spilled_blocks) + ", spill errors " +
                               std::to_string(s->spill_errors) + ", ram evictions " +
                               std::to_string(s->ram.evictions) + "\n" + d.log()
                         : s.error().message;
         }();
  EXPECT_NE(error.find("full"), std::string::npos) << error;
  // RAM keeps serving puts and gets.
  const auto bytes = block_bytes(81, 0, kBlock);
  ASSERT_TRUE(c->put(test_ns(), digest_of(81, 0), bytes).ok());
  auto g = c->get(test_ns(), digest_of(81, 0));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(*g, bytes);
  fill(*c, 64);  // more failed spills
  const std::string page = scrape(d.metrics_port());
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_ssd_healthy"), 0.0);
  EXPECT_GT(testing::metric(page, "cgn_kvcached_spill_errors_total"), 1.0);
  // One log line for the failure, not one per failed spill.
  const std::string log = d.log();
  size_t lines = 0;
  for (size_t at = log.find("spill to the SSD tier failed"); at != std::string::npos;
       at = log.find("spill to the SSD tier failed", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << log;
}

}  // namespace
}  // namespace cgn::kvcached
