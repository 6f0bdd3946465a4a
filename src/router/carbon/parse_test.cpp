#include "router/carbon/parse.h"

#include <gtest/gtest.h>

namespace cgn::router::carbon {
namespace {

TEST(ElectricityMapsParse, reads_the_documented_example) {
  auto r = parse_electricitymaps_latest(
      R"({"zone":"DE","carbonIntensity":302,"datetime":"2018-04-25T18:07:00.350Z","updatedAt":"2018-04-25T18:07:01.000Z"})",
      "DE");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->gco2_per_kwh, 302);
  EXPECT_FALSE(r->estimated);
}

TEST(ElectricityMapsParse, reads_current_fields) {
  auto r = parse_electricitymaps_latest(
      R"({"zone":"FR","carbonIntensity":41.5,"isEstimated":true,"estimationMethod":"TIME_SLICER_AVERAGE","emissionFactorType":"lifecycle"})",
      "FR");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->gco2_per_kwh, 41.5);
  EXPECT_TRUE(r->estimated);
}

TEST(ElectricityMapsParse, refuses_garbage_other_zones_and_bad_values) {
  for (const char* body : {"", "<html>", "[]", "{}", R"({"carbonIntensity":"302"})",
                           R"({"carbonIntensity":-1})", R"({"carbonIntensity":1e9})",
                           R"({"zone":"FR","carbonIntensity":302})", R"({"zone":7,"carbonIntensity":302})"}) {
    auto r = parse_electricitymaps_latest(body, "DE");
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code.reason, FetchReason::kBadBody) << body;
  }
}

TEST(WattTimeParse, converts_lbs_per_mwh_with_the_documented_constant) {
  auto r = parse_watttime_forecast(
      R"({"data":[{"point_time":"2026-03-01T00:00:00+00:00","value":1000,"version":"2026-03-01"},)"
      R"({"point_time":"2026-03-01T00:05:00+00:00","value":1,"version":"2026-03-01"}],)"
      R"("meta":{"region":"CAISO_NORTH","signal_type":"co2_moer","units":"lbs_co2_per_mwh"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->gco2_per_kwh, 453.59237);  // 1000 lbs/MWh x 453.59237 g/lb / 1000 kWh/MWh
  EXPECT_DOUBLE_EQ(lbs_per_mwh_to_g_per_kwh(412.5), 412.5 * 0.45359237);
}

TEST(WattTimeParse, refuses_a_percentile_signal) {
  auto r = parse_watttime_forecast(R"({"data":[{"value":87}],"meta":{"units":"percentile"}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code.reason, FetchReason::kBadUnits);
  EXPECT_NE(r.error().message.find("percentile"), std::string::npos);
}

TEST(WattTimeParse, refuses_garbage) {
  for (const char* body :
       {"", R"({"data":[{"value":)", R"({"data":[]})", R"({"data":[],"meta":{"units":"lbs_co2_per_mwh"}})",
        R"({"data":[{"value":"x"}],"meta":{"units":"lbs_co2_per_mwh"}})",
        R"({"data":[3],"meta":{"units":"lbs_co2_per_mwh"}})", R"({"data":[{"value":1}],"meta":[]})"}) {
    auto r = parse_watttime_forecast(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code.reason, FetchReason::kBadBody) << body;
  }
}

TEST(WattTimeParse, reads_the_login_token) {
  auto t = parse_watttime_login(R"({"token":"eyJhbGciOi.x.y"})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "eyJhbGciOi.x.y");
  EXPECT_FALSE(parse_watttime_login(R"({"token":""})").ok());
  EXPECT_FALSE(parse_watttime_login(R"({"tok":"a"})").ok());
  EXPECT_FALSE(parse_watttime_login("nope").ok());
}

}  // namespace
}  // namespace cgn::router::carbon
