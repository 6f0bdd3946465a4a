#include "sim/power_page.h"

#include <gtest/gtest.h>

#include <map>

#include "routing/prometheus.h"
#include "sim/node_model.h"

namespace cgn::sim {
namespace {

constexpr Nanos kSec = 1'000'000'000;

TEST(SimPower, EnergyIsIdlePlusBusyExcess) {
  const NodeModel m = default_node_model();
  // 10 s, of which 2 s prefilling and 3 s decoding.
  const double e = m.energy_joules(10 * kSec, 2 * kSec, 3 * kSec);
  EXPECT_DOUBLE_EQ(
      e, m.idle_watts * 10 + (m.prefill_watts - m.idle_watts) * 2 + (m.decode_watts - m.idle_watts) * 3);
  EXPECT_DOUBLE_EQ(m.energy_joules(5 * kSec, 0, 0), m.idle_watts * 5);
}

TEST(SimPower, MeterAveragesOverTheWindow) {
  const NodeModel m = default_node_model();
  PowerMeter meter;
  EXPECT_DOUBLE_EQ(meter.sample(m, 0, 0, 0).watts, m.idle_watts);
  // 1 s later, all of it decoding: decode power.
  EXPECT_NEAR(meter.sample(m, kSec, 0, kSec).watts, m.decode_watts, 1e-9);
  // Another 2 s of idle: the average over the last >= 1 s window is idle again.
  EXPECT_NEAR(meter.sample(m, 2 * kSec, 0, kSec).watts, m.idle_watts, 1e-9);
  const PowerReading r = meter.sample(m, 3 * kSec, 0, kSec);
  EXPECT_NEAR(r.watts, m.idle_watts, 1e-9);
  EXPECT_DOUBLE_EQ(r.energy_joules, m.energy_joules(3 * kSec, 0, kSec));
}

TEST(SimPower, PageHasTheExporterNamesUnitsAndLabels) {
  PowerReading r;
  r.watts = 123.4567;
  r.energy_joules = 9876.5439;
  const std::string uuid = gpu_uuid_for("sim-engine-0");
  EXPECT_EQ(uuid, gpu_uuid_for("sim-engine-0"));
  EXPECT_NE(uuid, gpu_uuid_for("sim-engine-1"));
  EXPECT_EQ(uuid.size(), 40u);  // GPU- + 36
  const std::string page = render_dcgm_page(r, 700, {uuid, "NVIDIA H100 80GB HBM3", "host-a"});
  auto parsed = routing::parse_prometheus_text(page);
  ASSERT_TRUE(parsed) << page;
  std::map<std::string, double> got;
  for (const auto& s : parsed->samples) {
    got[s.name] = s.value;
    for (const auto& [k, v] : {std::pair{"UUID", uuid},
                               {"gpu", "0"},
                               {"modelName", "NVIDIA H100 80GB HBM3"},
                               std::pair<const char*, std::string>{"Hostname", "host-a"}}) {
      ASSERT_NE(s.label(k), nullptr) << k;
      EXPECT_EQ(*s.label(k), v);
    }
  }
  EXPECT_DOUBLE_EQ(got.at("DCGM_FI_DEV_POWER_USAGE"), 123.457);               // W
  EXPECT_DOUBLE_EQ(got.at("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), 9876543);  // mJ
  EXPECT_DOUBLE_EQ(got.at("DCGM_FI_DEV_POWER_MGMT_LIMIT"), 700);
}

}  // namespace
}  // namespace cgn::sim
