#include <gtest/gtest.h>

#include "power/dcgm_exporter_source.h"
#include "power/fake_http.h"
#include "power/reader.h"
#include "testing/process.h"

namespace cgn::power {
namespace {

std::string page(uint64_t mj0, double w0) {
  return fmt::format(
      "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
      "DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"GPU-aaaa\",modelName=\"NVIDIA A100-SXM4-80GB\"}} {}\n"
      "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
      "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"0\",UUID=\"GPU-aaaa\",modelName=\"NVIDIA "
      "A100-SXM4-80GB\"}} {}\n",
      w0, mj0);
}

config::PowerConfig config_for(const std::string& url) {
  config::PowerConfig cfg;
  config::PowerSourceConfig sc;
  sc.name = "gpus";
  sc.kind = "dcgm_exporter";
  sc.url = url;
  sc.timeout_ms = 2000;
  cfg.sources.push_back(sc);
  return cfg;
}

TEST(DcgmExporterSource, reads_the_exporter_page_over_http_and_counts_energy_from_the_counter) {
  testing::FakeHttp exporter;
  exporter.serve("/metrics", page(5'000'000, 250.25));
  auto reader = Reader::from_config(config_for(exporter.url("/metrics")));
  ASSERT_TRUE(reader.ok()) << reader.error().message;
  Reader& r = *reader.value();
  r.poll();
  exporter.serve("/metrics", page(5'123'457, 260.5));
  r.poll();
  Snapshot s = r.snapshot();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].latest.device, "GPU-aaaa");
  EXPECT_EQ(s.devices[0].latest.watts, 260.5);
  EXPECT_EQ(s.devices[0].energy_uj, 123'457'000u);  // ground truth: 123457 mJ between the pages
  EXPECT_TRUE(s.devices[0].from_counter);
  EXPECT_EQ(s.devices[0].latest.gpu->name, "NVIDIA A100-SXM4-80GB");
  auto reqs = exporter.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].target(), "/metrics");
}

TEST(DcgmExporterSource, exporter_gone_makes_the_source_down_and_its_gpus_absent) {
  auto exporter = std::make_unique<testing::FakeHttp>();
  exporter->serve("/metrics", page(1000, 100));
  auto reader = Reader::from_config(config_for(exporter->url("/metrics")));
  ASSERT_TRUE(reader.ok());
  Reader& r = *reader.value();
  r.poll();
  ASSERT_EQ(r.snapshot().devices.size(), 1u);
  exporter.reset();
  r.poll();
  Snapshot s = r.snapshot();
  EXPECT_TRUE(s.devices.empty());
  EXPECT_FALSE(s.sources.at(0).up);
  EXPECT_EQ(s.sources.at(0).errors, 1u);
}

TEST(DcgmExporterSource, non_200_answer_is_a_failure_not_a_reading) {
  testing::FakeHttp exporter;
  auto reader = Reader::from_config(config_for(exporter.url("/other")));
  ASSERT_TRUE(reader.ok());
  reader.value()->poll();
  Snapshot s = reader.value()->snapshot();
  EXPECT_TRUE(s.devices.empty());
  EXPECT_FALSE(s.sources.at(0).up);
  EXPECT_NE(s.sources.at(0).last_error.find("404"), std::string::npos) << s.sources.at(0).last_error;
}

}  // namespace
}  // namespace cgn::power
