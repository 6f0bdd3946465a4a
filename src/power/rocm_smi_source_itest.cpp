// ROCm SMI through a fake librocm_smi64.so (fakes/fake_rocm_smi.c) that dlopen and dlsym really load.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "power/reader.h"
#include "power/rocm_smi_source.h"
#include "testing/process.h"

namespace cgn::power {
namespace {

TEST(RocmSmiSource, reads_microwatts_and_the_tick_counter_times_its_resolution) {
  cgn::testing::TempDir dir;
  ::setenv("CGN_FAKE_RSMI_FILE", dir.file("devices").c_str(), 1);
  cgn::testing::write_file(
      dir.file("devices"),
      "7a3f0c1d2e4b5a69 550250000 4000 15.25 750000000 206158430208 AMD Instinct MI300X\n");
  config::PowerConfig cfg;
  config::PowerSourceConfig sc;
  sc.name = "amd";
  sc.kind = "rocm_smi";
  sc.path = CGN_FAKE_RSMI;
  cfg.sources.push_back(sc);
  auto reader = Reader::from_config(cfg);
  ASSERT_TRUE(reader.ok());
  reader.value()->poll();
  cgn::testing::write_file(
      dir.file("devices"),
      "7a3f0c1d2e4b5a69 560000000 1004000 15.25 750000000 206158430208 AMD Instinct MI300X\n");
  reader.value()->poll();
  Snapshot s = reader.value()->snapshot();
  ::unsetenv("CGN_FAKE_RSMI_FILE");
  ASSERT_EQ(s.devices.size(), 1u);
  const DeviceReading& d = s.devices[0];
  EXPECT_EQ(d.latest.device, "0x7a3f0c1d2e4b5a69");
  EXPECT_EQ(d.latest.watts, 560.0);
  EXPECT_EQ(d.energy_uj, 15'250'000u);  // 1,000,000 ticks × 15.25 µJ
  EXPECT_EQ(d.latest.power_limit_watts, 750.0);
  EXPECT_EQ(d.latest.gpu->name, "AMD Instinct MI300X");
  EXPECT_EQ(d.latest.gpu->memory_bytes, 206158430208u);
}

TEST(RocmSmiSource, missing_library_is_unsupported) {
  config::PowerSourceConfig sc;
  sc.name = "amd";
  sc.kind = "rocm_smi";
  sc.path = "/nonexistent/librocm_smi64.so";
  auto got = make_rocm_smi_source(sc).value()->read();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, SourceError::kUnsupported);
}

}  // namespace
}  // namespace cgn::power
