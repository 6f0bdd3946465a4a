// RAPL against a fake powercap tree in a temporary directory: real files, real reads.
#include <gtest/gtest.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "power/rapl_source.h"
#include "power/reader.h"
#include "testing/process.h"

namespace cgn::power {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kRange = 262'143'328'850;  // a real package's max_energy_range_uj

struct FakePowercap {
  cgn::testing::TempDir dir;
  FakePowercap() {
    ::chmod(dir.path().c_str(), 0755);
    zone("intel-rapl:0", "package-0", 1'000'000);
    zone("intel-rapl:0/intel-rapl:0:0", "core", 400'000);
    zone("intel-rapl:0/intel-rapl:0:1", "dram", 50'000);
    zone("intel-rapl:1", "package-1", 7'000'000);
    fs::create_directories(dir.path() + "/intel-rapl");  // the control type: no energy_uj
  }
  void zone(const std::string& rel, const std::string& name, uint64_t uj) {
    fs::create_directories(dir.path() + "/" + rel);
    cgn::testing::write_file(dir.path() + "/" + rel + "/name", name + "\n");
    cgn::testing::write_file(dir.path() + "/" + rel + "/max_energy_range_uj", std::to_string(kRange) + "\n");
    set(rel, uj);
  }
  void set(const std::string& rel, uint64_t uj) {
    cgn::testing::write_file(dir.path() + "/" + rel + "/energy_uj", std::to_string(uj) + "\n");
  }
  config::PowerConfig config() const {
    config::PowerConfig cfg;
    config::PowerSourceConfig sc;
    sc.name = "cpu";
    sc.kind = "rapl";
    sc.path = dir.path();
    cfg.sources.push_back(sc);
    return cfg;
  }
};

const DeviceReading* find(const Snapshot& s, const std::string& device) {
  for (const auto& d : s.devices) {
    if (d.latest.device == device) {
      return &d;
    }
  }
  return nullptr;
}

TEST(RaplSource, reads_packages_and_dram_not_core_and_counts_across_the_wrap_exactly) {
  FakePowercap pc;
  auto reader = Reader::from_config(pc.config());
  ASSERT_TRUE(reader.ok()) << reader.error().message;
  Reader& r = *reader.value();
  r.poll();
  Snapshot first = r.snapshot();
  ASSERT_EQ(first.devices.size(), 3u);  // intel-rapl:0, its dram subzone, intel-rapl:1
  EXPECT_EQ(find(first, "intel-rapl:0:0"), nullptr);
  ASSERT_NE(find(first, "intel-rapl:0:1"), nullptr);
  EXPECT_FALSE(find(first, "intel-rapl:0")->latest.watts.has_value());  // no delta yet
  EXPECT_EQ(*find(first, "intel-rapl:0")->latest.counter_range_uj, kRange);

  pc.set("intel-rapl:0", kRange - 250);  // forward
  pc.set("intel-rapl:1", 7'000'123);
  r.poll();
  pc.set("intel-rapl:0", 1'750);  // wrapped: 250 + 1750 more
  r.poll();
  Snapshot s = r.snapshot();
  EXPECT_EQ(find(s, "intel-rapl:0")->energy_uj, (kRange - 250 - 1'000'000) + 2'000);
  EXPECT_EQ(find(s, "intel-rapl:1")->energy_uj, 123u);
  EXPECT_EQ(find(s, "intel-rapl:0:1")->energy_uj, 0u);
  EXPECT_TRUE(find(s, "intel-rapl:0")->from_counter);
  ASSERT_TRUE(find(s, "intel-rapl:0")->latest.watts.has_value());
  EXPECT_GT(*find(s, "intel-rapl:0")->latest.watts, 0.0);
}

TEST(RaplSource, permission_denied_is_unsupported_and_no_device_reads_zero) {
  FakePowercap pc;
  ::chmod((pc.dir.path() + "/intel-rapl:0/energy_uj").c_str(), 0400);
  ::chmod((pc.dir.path() + "/intel-rapl:1/energy_uj").c_str(), 0400);
  auto reader = Reader::from_config(pc.config());
  ASSERT_TRUE(reader.ok());
  // Read as an unprivileged user: root's file capabilities go with a non-zero fsuid (this thread only).
  std::thread t([&] {
    if (::geteuid() == 0) {
      ::setfsuid(65534);
    }
    reader.value()->poll();
  });
  t.join();
  Snapshot s = reader.value()->snapshot();
  EXPECT_TRUE(s.devices.empty());
  ASSERT_EQ(s.sources.size(), 1u);
  EXPECT_FALSE(s.sources[0].up);
  EXPECT_NE(s.sources[0].last_error.find("permission denied"), std::string::npos) << s.sources[0].last_error;
}

TEST(RaplSource, watts_are_counter_deltas_over_the_clock_between_reads_even_across_the_wrap) {
  FakePowercap pc;
  ManualClock clock(seconds_to_nanos(100));
  auto src = make_rapl_source(pc.config().sources[0], clock);
  ASSERT_TRUE(src.ok());
  auto watts = [&](const std::vector<PowerSample>& samples, const std::string& device) {
    for (const auto& s : samples) {
      if (s.device == device) {
        return s.watts;
      }
    }
    return std::optional<double>();
  };
  auto first = src.value()->read();
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(watts(first.value(), "intel-rapl:0").has_value());  // one reading: no rate yet
  // 2 s later: package-0 +300 J (150 W), dram +25 J (12.5 W), package-1 +6 J (3 W).
  pc.set("intel-rapl:0", 1'000'000 + 300'000'000);
  pc.set("intel-rapl:0/intel-rapl:0:1", 50'000 + 25'000'000);
  pc.set("intel-rapl:1", 13'000'000);
  clock.advance(seconds_to_nanos(2));
  auto second = src.value()->read();
  ASSERT_TRUE(second.ok());
  EXPECT_DOUBLE_EQ(*watts(second.value(), "intel-rapl:0"), 150.0);
  EXPECT_DOUBLE_EQ(*watts(second.value(), "intel-rapl:0:1"), 12.5);
  EXPECT_DOUBLE_EQ(*watts(second.value(), "intel-rapl:1"), 3.0);
  // Across the wrap: 4 J up to the range, then 16 J past 0, over 0.5 s = 40 W.
  pc.set("intel-rapl:1", kRange - 4'000'000);
  clock.advance(seconds_to_nanos(1));
  ASSERT_TRUE(src.value()->read().ok());
  pc.set("intel-rapl:1", 16'000'000);
  clock.advance(seconds_to_nanos(0.5));
  auto wrapped = src.value()->read();
  ASSERT_TRUE(wrapped.ok());
  EXPECT_DOUBLE_EQ(*watts(wrapped.value(), "intel-rapl:1"), 40.0);
  // No time passed: no rate (never a division by zero).
  auto same = src.value()->read();
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(watts(same.value(), "intel-rapl:1").has_value());
}

TEST(RaplSource, a_root_without_zones_is_unsupported) {
  cgn::testing::TempDir empty;
  config::PowerSourceConfig sc;
  sc.name = "cpu";
  sc.kind = "rapl";
  sc.path = empty.path();
  auto src = make_rapl_source(sc);
  ASSERT_TRUE(src.ok());
  auto got = src.value()->read();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, SourceError::kUnsupported);
}

TEST(SysfsU64, accepts_one_decimal_and_nothing_else) {
  EXPECT_EQ(parse_sysfs_u64("123\n"), 123u);
  EXPECT_FALSE(parse_sysfs_u64("").has_value());
  EXPECT_FALSE(parse_sysfs_u64("-1\n").has_value());
  EXPECT_FALSE(parse_sysfs_u64("12x\n").has_value());
  EXPECT_FALSE(parse_sysfs_u64("99999999999999999999999\n").has_value());
}

}  // namespace
}  // namespace cgn::power
