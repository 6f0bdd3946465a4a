#include "power/dcgm_exporter_source.h"

#include <gtest/gtest.h>

#include "testing/process.h"

namespace cgn::power {
namespace {

PowerSample proto() {
  PowerSample p;
  p.source = "gpus";
  p.kind = "dcgm_exporter";
  return p;
}

TEST(DcgmPage, reads_watts_energy_counter_and_identity_per_gpu_uuid) {
  std::string page =
      cgn::testing::read_file(cgn::testing::source_path("src/power/testdata/dcgm_exporter_metrics.txt"));
  auto got = parse_dcgm_page(page, proto());
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got.value().size(), 2u);
  const PowerSample& a = got.value()[0];
  EXPECT_EQ(a.device, "GPU-5fd4a0a8-8b3a-4a7e-9d44-2a1d0c9b7e11");
  EXPECT_EQ(a.source, "gpus");
  EXPECT_EQ(a.kind, "dcgm_exporter");
  EXPECT_DOUBLE_EQ(*a.watts, 412.337);
  EXPECT_EQ(*a.counter_uj, 123'456'789'012'000u);  // mJ -> µJ, exact
  ASSERT_TRUE(a.gpu.has_value());
  EXPECT_EQ(a.gpu->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(a.gpu->uuid, a.device);
  EXPECT_EQ(*a.gpu->memory_bytes, uint64_t{81008} << 20);
  EXPECT_EQ(a.window, Window::kAverage);
  const PowerSample& b = got.value()[1];
  EXPECT_EQ(b.device, "GPU-9c1e2f33-0d7b-4c55-8e21-6f3a9b0c4d22");
  EXPECT_DOUBLE_EQ(*b.watts, 71.5);
  EXPECT_EQ(*b.counter_uj, 98'765'432'000u);
}

TEST(DcgmPage, gpu_without_energy_series_has_no_counter_and_garbage_is_not_a_reading) {
  std::string page =
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 300\n"
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} NaN\n"
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"2\"} -5\n";
  auto got = parse_dcgm_page(page, proto());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got.value().size(), 1u);
  EXPECT_EQ(got.value()[0].device, "0");
  EXPECT_EQ(got.value()[0].watts, 300.0);
  EXPECT_FALSE(got.value()[0].counter_uj.has_value());
}

TEST(DcgmPage, malformed_page_is_bad_data) {
  auto got = parse_dcgm_page("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\" 300\n", proto());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, SourceError::kBadData);
}

TEST(DcgmPage, page_of_other_metrics_has_no_devices) {
  auto got = parse_dcgm_page("# TYPE up gauge\nup 1\n", proto());
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got.value().empty());
}

}  // namespace
}  // namespace cgn::power
