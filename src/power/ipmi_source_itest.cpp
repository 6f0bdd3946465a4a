// IPMI through a fake ipmitool (src/power/testdata/fake_ipmitool) printing the real format.
#include <gtest/gtest.h>

#include <filesystem>

#include "power/ipmi_source.h"
#include "power/reader.h"
#include "testing/process.h"

namespace cgn::power {
namespace {

struct FakeIpmitool {
  cgn::testing::TempDir dir;
  std::string tool = dir.file("ipmitool");
  FakeIpmitool() {
    std::filesystem::copy_file(cgn::testing::source_path("src/power/testdata/fake_ipmitool"), tool);
    std::filesystem::permissions(tool, std::filesystem::perms::owner_all);
  }
  void watts(int w) const { cgn::testing::write_file(dir.file("watts"), std::to_string(w)); }
  config::PowerConfig config() const {
    config::PowerConfig cfg;
    config::PowerSourceConfig sc;
    sc.name = "bmc";
    sc.kind = "ipmi";
    sc.path = tool;
    sc.timeout_ms = 5000;
    cfg.sources.push_back(sc);
    return cfg;
  }
};

TEST(IpmiSource, reads_the_instantaneous_watts_from_ipmitool) {
  FakeIpmitool fake;
  fake.watts(412);
  auto reader = Reader::from_config(fake.config());
  ASSERT_TRUE(reader.ok());
  reader.value()->poll();
  Snapshot s = reader.value()->snapshot();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].latest.device, "chassis");
  EXPECT_EQ(s.devices[0].latest.watts, 412.0);
  EXPECT_FALSE(s.devices[0].latest.counter_uj.has_value());
}

TEST(IpmiSource, deactivated_reading_and_failing_tool_are_failures) {
  FakeIpmitool fake;
  fake.watts(0);
  cgn::testing::write_file(fake.dir.file("state"), "deactivated");
  auto reader = Reader::from_config(fake.config());
  ASSERT_TRUE(reader.ok());
  reader.value()->poll();
  Snapshot s = reader.value()->snapshot();
  EXPECT_TRUE(s.devices.empty());
  EXPECT_NE(s.sources.at(0).last_error.find("deactivated"), std::string::npos);
  std::filesystem::remove(fake.dir.file("state"));
  cgn::testing::write_file(fake.dir.file("exit"), "1");
  reader.value()->poll();
  EXPECT_NE(reader.value()->snapshot().sources.at(0).last_error.find("exited 1"), std::string::npos);
}

TEST(IpmiSource, missing_ipmitool_is_unsupported) {
  config::PowerSourceConfig sc;
  sc.name = "bmc";
  sc.kind = "ipmi";
  sc.path = "/nonexistent/ipmitool";
  auto got = make_ipmi_source(sc).value()->read();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, SourceError::kUnsupported);
}

TEST(DcmiParse, reads_average_and_period_and_rejects_text_without_a_reading) {
  auto r = parse_dcmi_power_reading(
      "    Instantaneous power reading:                   87 Watts\n"
      "    Average power reading over sample period:      91 Watts\n"
      "    Sampling period:                          00000005 Seconds.\n"
      "    Power reading state is:                   activated\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().instant_watts, 87u);
  EXPECT_EQ(r.value().average_watts, 91u);
  EXPECT_EQ(r.value().sampling_period_s, 5u);
  EXPECT_FALSE(parse_dcmi_power_reading("Error: DCMI not supported\n").ok());
  EXPECT_FALSE(parse_dcmi_power_reading("    Instantaneous power reading: lots Watts\n").ok());
}

}  // namespace
}  // namespace cgn::power
