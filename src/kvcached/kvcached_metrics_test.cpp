// The metrics mirror the store's statistics at scrape time: counters add what the store counted
// since the last scrape, gauges take its values; the daemon's own counters carry their labels.
#include "kvcached/kvcached_metrics.h"

#include <gtest/gtest.h>

#include "kvcached/kv_service.h"
#include "testing/metrics_page.h"

namespace cgn::kvcached {
namespace {

TEST(KvcachedMetrics, MirrorTheStoreAtScrapeTime) {
  metrics::Registry reg;
  kvcache::StoreStats s;
  int reads = 0;
  KvcachedMetrics m(reg, [&] {
    ++reads;
    return s;
  });
  EXPECT_EQ(reads, 0) << "nothing is read until a scrape";
  s.ram.hits = 5;
  s.ssd.hits = 2;
  s.ram.blocks = 9;
  s.ram.capacity = 1 << 20;
  s.checksum_failures = 1;
  s.scan_complete = false;
  s.ssd_error = "disk full";
  std::string page = reg.render();
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_hits_total{tier="ram"})"), 5.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_hits_total{tier="ssd"})"), 2.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_blocks{tier="ram"})"), 9.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_capacity_bytes{tier="ram"})"), 1048576.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_checksum_failures_total"), 1.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_scan_complete"), 0.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_ssd_healthy"), 0.0);
  s.ram.hits = 8;
  s.ram.blocks = 3;
  s.ssd_error.clear();
  s.scan_complete = true;
  page = reg.render();
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_hits_total{tier="ram"})"), 8.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_blocks{tier="ram"})"), 3.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_scan_complete"), 1.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_ssd_healthy"), 1.0);
}

TEST(KvcachedMetrics, CountRequestsAndConnections) {
  metrics::Registry reg;
  KvcachedMetrics m(reg, [] { return kvcache::StoreStats{}; });
  m.grpc_request("GetBlock", "NOT_FOUND");
  m.grpc_request("GetBlock", "NOT_FOUND");
  m.fast_path_request("GET", "OK");
  m.fast_path_connection_opened();
  m.fast_path_connection_opened();
  m.fast_path_connection_closed();
  m.fast_path_connection_refused();
  const std::string page = reg.render();
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_grpc_requests_total{method="GetBlock",code="NOT_FOUND"})"),
            2.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_fast_path_requests_total{op="GET",status="OK"})"), 1.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_fast_path_connections"), 1.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_fast_path_connections_refused_total"), 1.0);
}

TEST(KvcachedLease, StoreTimeBecomesUnixMilliseconds) {
  ManualClock clock;
  clock.set(100 * kNanosPerSecond);
  EXPECT_EQ(to_unix_ms(0, clock), 0u) << "no lease stays 0";
  const auto now_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  const uint64_t at = to_unix_ms(105 * kNanosPerSecond, clock);
  EXPECT_GE(at, now_ms + 4900);
  EXPECT_LE(at, now_ms + 5100 + 60'000);
}

}  // namespace
}  // namespace cgn::kvcached
