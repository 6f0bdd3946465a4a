// cgn-kvcached-replay against reference_replay.py on the first requests of the conversation
// trace: a real daemon on loopback, real files for its SSD tier. The hit counts must be equal.
#include <gtest/gtest.h>

#include "bench/kvcached/test_daemon.h"
#include "testing/capability.h"

namespace {

using cgn::kvbench::testing::run_to_end;
using cgn::kvbench::testing::start_daemon;
using cgn::testing::TempDir;

constexpr int kRequests = 1500;
constexpr uint64_t kBlockBytes = 4096;

bool have_python3() {
  TempDir dir;
  return run_to_end(dir, "python3", {"python3", "--version"}, std::chrono::seconds(30)).status == 0;
}

// reference_replay.py's JSON for the first kRequests requests with `capacity` blocks (0: unbounded).
nlohmann::json reference(const TempDir& dir, uint64_t capacity) {
  auto r =
      run_to_end(dir, "reference-" + std::to_string(capacity),
                 {"python3", cgn::testing::source_path("bench/kvcached/reference_replay.py"), "--capacity",
                  std::to_string(capacity), "--limit", std::to_string(kRequests), "--json"},
                 std::chrono::seconds(60));
  EXPECT_EQ(r.status, 0) << r.output;
  const auto objs = r.objects();
  EXPECT_EQ(objs.size(), 1u) << r.output;
  return objs.empty() ? nlohmann::json::object() : objs.front();
}

nlohmann::json replay(const TempDir& dir, const std::string& name, const std::string& grpc,
                      const std::string& socket = "") {
  std::vector<std::string> argv{cgn::testing::bin_path("cgn-kvcached-replay"),
                                "--grpc",
                                grpc,
                                "--limit",
                                std::to_string(kRequests),
                                "--block-bytes",
                                std::to_string(kBlockBytes)};
  if (!socket.empty()) {
    argv.insert(argv.end(), {"--socket", socket});
  }
  auto r = run_to_end(dir, name, argv, std::chrono::seconds(120));
  EXPECT_EQ(r.status, 0) << r.output;
  const auto objs = r.objects();
  EXPECT_EQ(objs.size(), 1u) << r.output;
  return objs.empty() ? nlohmann::json::object() : objs.front();
}

void expect_same_hits(const nlohmann::json& daemon, const nlohmann::json& ref) {
  ASSERT_TRUE(daemon.contains("hits") && ref.contains("hits")) << daemon << "\n" << ref;
  EXPECT_EQ(daemon["requests"], kRequests);
  EXPECT_EQ(daemon["blocks"], ref["blocks"]);
  EXPECT_EQ(daemon["hits"], ref["hits"])
      << "daemon " << daemon["hit_rate_pct"] << " %, reference " << ref["hit_rate_pct"] << " %";
  EXPECT_NEAR(daemon["hit_rate_pct"].get<double>(), ref["hit_rate_pct"].get<double>(), 0.1);
  EXPECT_GT(daemon["verified_reads"].get<uint64_t>(), 0u);
}

class KvcachedReplay : public ::testing::Test {
 protected:
  void SetUp() override { CGN_REQUIRE_CAPABILITY(have_python3(), "python3"); }
  TempDir dir_;
};

// A RAM tier of exactly 2,000 blocks and no SSD: an LRU of 2,000 blocks, through gRPC.
TEST_F(KvcachedReplay, ram_tier_matches_the_reference_lru_over_grpc) {
  const auto ref = reference(dir_, 2000);
  auto d = start_daemon(dir_, "ram", 2000 * kBlockBytes);
  ASSERT_TRUE(d);
  const auto got = replay(dir_, "replay-ram", d->grpc);
  expect_same_hits(got, ref);
  EXPECT_EQ(got["hits_ssd"], 0);
  EXPECT_GT(got["ram_evictions"].get<uint64_t>(), 0u) << "the prefix must overflow the RAM tier";
}

// The same through the local fast path (LocalClient), Stats over gRPC.
TEST_F(KvcachedReplay, ram_tier_matches_the_reference_lru_over_the_fast_path) {
  const auto ref = reference(dir_, 2000);
  auto d = start_daemon(dir_, "fast", 2000 * kBlockBytes);
  ASSERT_TRUE(d);
  const auto got = replay(dir_, "replay-fast", d->grpc, d->socket);
  expect_same_hits(got, ref);
  EXPECT_EQ(got["path"], "local");
}

// 2,000 blocks of RAM over an unbounded SSD tier: nothing is lost, so the hit rate is the
// unbounded reference's, and the blocks that left RAM are hits on the SSD tier.
TEST_F(KvcachedReplay, ssd_tier_makes_it_the_unbounded_reference) {
  const auto ref = reference(dir_, 0);
  TempDir ssd;
  auto d = start_daemon(dir_, "ssd", 2000 * kBlockBytes, ssd.path());
  ASSERT_TRUE(d);
  const auto got = replay(dir_, "replay-ssd", d->grpc);
  expect_same_hits(got, ref);
  EXPECT_GT(got["hits_ssd"].get<uint64_t>(), 0u);
  EXPECT_GT(got["spilled_blocks"].get<uint64_t>(), 0u);
  EXPECT_EQ(got["spill_errors"], 0);
}

}  // namespace
