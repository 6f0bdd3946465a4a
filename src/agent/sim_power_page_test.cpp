// The simulator's dcgm-exporter page (sim/power_page.h) read by the agent's real dcgm_exporter
// source parser (power/dcgm_exporter_source.h): the readings come through exactly, in W and µJ.
#include <gtest/gtest.h>

#include "power/dcgm_exporter_source.h"
#include "sim/node_model.h"
#include "sim/power_page.h"

namespace cgn::agent {
namespace {

TEST(SimPowerPage, the_dcgm_source_reads_the_simulators_page_exactly) {
  const sim::NodeModel m = sim::default_node_model();
  sim::PowerMeter meter;
  (void)meter.sample(m, 0, 0, 0);
  // 2 s, of which 0.5 s prefilling and 1 s decoding.
  const sim::PowerReading r = meter.sample(m, 2'000'000'000, 500'000'000, 1'000'000'000);
  const std::string uuid = sim::gpu_uuid_for("sim-node-0");
  const std::string page = sim::render_dcgm_page(r, m.power_limit_watts, {uuid, m.gpu_name, "host"});
  power::PowerSample proto;
  proto.source = "dcgm";
  proto.kind = "dcgm_exporter";
  auto samples = power::parse_dcgm_page(page, proto);
  ASSERT_TRUE(samples.ok()) << samples.error().message << "\n" << page;
  ASSERT_EQ(samples->size(), 1u) << page;
  const power::PowerSample& s = samples->front();
  EXPECT_EQ(s.device, uuid);
  ASSERT_TRUE(s.watts.has_value());
  // 75 W idle + 575 W × 0.5 s + 375 W × 1 s over 2 s = 406.25 W.
  EXPECT_NEAR(*s.watts, 406.25, 1e-3);
  ASSERT_TRUE(s.counter_uj.has_value());
  // 75 × 2 + 575 × 0.5 + 375 × 1 = 812.5 J: 812,500 mJ on the page, 812,500,000 µJ read.
  EXPECT_EQ(*s.counter_uj, 812'500'000u);
  EXPECT_EQ(s.power_limit_watts, 700.0);
  ASSERT_TRUE(s.gpu.has_value());
  EXPECT_EQ(s.gpu->name, "NVIDIA H100 80GB HBM3");
}

}  // namespace
}  // namespace cgn::agent
