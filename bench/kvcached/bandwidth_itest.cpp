// Smoke run of cgn-kvcached-bench with tiny sizes against a real cgn-kvcached (RAM only), a
// second one with a small RAM tier over an SSD tier in a temp dir, and a real redis-server on a
// loopback port and a Unix socket: every row is there (the fast path one block a call and in
// batches) and every number is sane; every block read back is checked by its stamp.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "bench/kvcached/bandwidth.h"
#include "bench/kvcached/test_daemon.h"
#include "testing/capability.h"

namespace {

using cgn::kvbench::testing::run_to_end;
using cgn::kvbench::testing::start_daemon;
using cgn::testing::TempDir;

bool have_redis_server() {
  TempDir dir;
  return run_to_end(dir, "redis-version", {"redis-server", "--version"}, std::chrono::seconds(30)).status ==
         0;
}

TEST(KvcachedBench, every_path_reports_every_row) {
  CGN_REQUIRE_CAPABILITY(have_redis_server(), "redis-server (Debian redis-server)");
  TempDir dir;
  TempDir ssd;
  const int redis_port = cgn::testing::free_port();
  const std::string redis_sock = dir.file("redis.sock");
  cgn::testing::Process redis({"redis-server", "--bind", "127.0.0.1", "--port", std::to_string(redis_port),
                               "--unixsocket", redis_sock, "--unixsocketperm", "700", "--save", "",
                               "--appendonly", "no", "--maxmemory", "256mb", "--dir", dir.path()},
                              {}, dir.file("redis.log"));
  ASSERT_TRUE(
      cgn::testing::wait_until([&] { return cgn::kvbench::redis_flushall("127.0.0.1", redis_port, "").ok(); },
                               std::chrono::seconds(30)))
      << redis.log();
  auto ram = start_daemon(dir, "ram", 64ull << 20);
  ASSERT_TRUE(ram);
  auto tiered = start_daemon(dir, "tiered", 1ull << 20, ssd.path());
  ASSERT_TRUE(tiered);

  auto r = run_to_end(dir, "bench",
                      {cgn::testing::bin_path("cgn-kvcached-bench"),
                       "--sizes",
                       "65536,262144",
                       "--threads",
                       "1,2",
                       "--working-set-mib",
                       "1",
                       "--get-rounds",
                       "2",
                       "--repeats",
                       "2",
                       "--warm-mib",
                       "64",
                       "--batch",
                       "8",
                       "--grpc",
                       ram->grpc,
                       "--socket",
                       ram->socket,
                       "--redis-tcp",
                       "127.0.0.1:" + std::to_string(redis_port),
                       "--redis-unix",
                       redis_sock,
                       "--ssd-grpc",
                       tiered->grpc,
                       "--ssd-socket",
                       tiered->socket,
                       "--ssd-dir",
                       ssd.path(),
                       "--ssd-block-bytes",
                       "65536",
                       "--ssd-mib",
                       "4"},
                      std::chrono::seconds(120));
  ASSERT_EQ(r.status, 0) << r.output;

  std::set<std::tuple<uint64_t, std::string, std::string, uint32_t>> rows;
  for (const auto& j : r.objects()) {
    EXPECT_GT(j["bytes"].get<uint64_t>(), 0u) << j;
    EXPECT_GT(j["seconds"].get<double>(), 0.0) << j;
    EXPECT_GT(j["gib_s"].get<double>(), 0.0) << j;
    EXPECT_LT(j["gib_s"].get<double>(), 10000.0) << j;
    if (!j["path"].get<std::string>().starts_with("ssd")) {
      EXPECT_EQ(j["rounds"].size(), 2u) << j;
    }
    if (j.contains("blocks")) {
      EXPECT_GT(j["blocks"].get<uint64_t>(), 0u) << j;
    }
    EXPECT_TRUE(rows.emplace(j["block_bytes"], j["path"], j["op"], j["threads"]).second) << "twice: " << j;
  }
  for (uint64_t size : {65536u, 262144u}) {
    for (uint32_t t : {1u, 2u}) {
      for (const char* path : {"memcpy", "local", "local-batch", "grpc", "redis-tcp", "redis-unix"}) {
        for (const char* op : {"put", "get"}) {
          EXPECT_TRUE(rows.contains({size, path, op, t}))
              << "missing: " << size << " " << path << " " << op << " " << t;
        }
      }
    }
  }
  for (uint32_t t : {1u, 2u}) {
    EXPECT_TRUE(rows.contains({65536, "ssd-grpc", "get", t})) << r.output;
    EXPECT_TRUE(rows.contains({65536, "ssd-local", "get", t})) << r.output;
  }
  EXPECT_TRUE(rows.contains({65536, "ssd-seqread", "get", 1})) << r.output;
  // The O_DIRECT sequential read is there where the temp dir's filesystem takes O_DIRECT.
  const size_t direct = rows.contains({65536, "ssd-seqread-direct", "get", 1}) ? 1 : 0;
  EXPECT_EQ(rows.size(), 2u * 2u * 6u * 2u + 4u + 1u + direct) << r.output;
}

}  // namespace

namespace {

// Bad input gets a clear error and a non-zero exit, never a crash or a hang.
TEST(KvcachedBenchTools, refuse_bad_input_with_a_clear_error) {
  TempDir dir;
  auto small = run_to_end(dir, "small", {cgn::testing::bin_path("cgn-kvcached-bench"), "--sizes", "4"},
                          std::chrono::seconds(30));
  EXPECT_EQ(small.status, 2) << small.output;
  EXPECT_NE(small.output.find("at least 8 bytes"), std::string::npos) << small.output;

  auto no_dir =
      run_to_end(dir, "nodir", {cgn::testing::bin_path("cgn-kvcached-bench"), "--ssd-grpc", "127.0.0.1:1"},
                 std::chrono::seconds(30));
  EXPECT_EQ(no_dir.status, 2) << no_dir.output;
  EXPECT_NE(no_dir.output.find("--ssd-grpc needs --ssd-dir"), std::string::npos) << no_dir.output;

  const std::string missing = dir.file("missing.jsonl");
  auto trace =
      run_to_end(dir, "trace",
                 {cgn::testing::bin_path("cgn-kvcached-replay"), "--grpc", "127.0.0.1:1", "--trace", missing},
                 std::chrono::seconds(30));
  EXPECT_EQ(trace.status, 2) << trace.output;
  EXPECT_NE(trace.output.find(missing), std::string::npos) << trace.output;

  // A daemon that is not there: the first call fails with the transport's message.
  cgn::testing::write_file(dir.file("t.jsonl"),
                           "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, "
                           "\"hash_ids\": [0]}\n");
  auto down =
      run_to_end(dir, "down",
                 {cgn::testing::bin_path("cgn-kvcached-replay"), "--grpc",
                  "127.0.0.1:" + std::to_string(cgn::testing::free_port()), "--trace", dir.file("t.jsonl")},
                 std::chrono::seconds(60));
  EXPECT_EQ(down.status, 1) << down.output;
  EXPECT_NE(down.output.find("cgn-kvcached-replay: "), std::string::npos) << down.output;
}

}  // namespace
