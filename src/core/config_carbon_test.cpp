// [router.carbon] keys: defaults, every key read, what each provider needs, the percentile signal
// refused, errors naming file, line and key, unknown keys rejected, and the dump reading back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config.h"
#include "testing/config_env.h"

namespace cgn::config {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const EnvLookup kEnv = cgn::testing::map_env({{"EM_TOKEN", "em-secret-123"}, {"WT_PASS", "wt-secret-456"}});

Result<CognitoraConfig, ConfigError> load(std::string_view text) {
  return cgn::testing::load_toml(text, kEnv);
}
std::string error_of(std::string_view text) {
  return cgn::testing::load_error(text, kEnv);
}

TEST(ConfigCarbon, OffByDefault) {
  auto r = load("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CarbonConfig& c = r->router.carbon;
  EXPECT_EQ(c.provider, "off");
  EXPECT_DOUBLE_EQ(c.threshold_gco2_per_kwh, 400);
  EXPECT_EQ(c.poll_interval_ms, 900000u);
  EXPECT_EQ(c.signal_type, "co2_moer");
}

TEST(ConfigCarbon, ReadsElectricityMaps) {
  auto r = load(R"([router.carbon]
provider = "electricitymaps"
zone = "DE"
url = "http://127.0.0.1:9999"
token_env = "EM_TOKEN"
threshold_gco2_per_kwh = 250.5
poll_interval_ms = 60000
timeout_ms = 2000
max_backoff_ms = 600000
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CarbonConfig& c = r->router.carbon;
  EXPECT_EQ(c.provider, "electricitymaps");
  EXPECT_EQ(c.zone, "DE");
  EXPECT_EQ(c.url, "http://127.0.0.1:9999");
  EXPECT_EQ(c.token.reveal(), "em-secret-123");
  EXPECT_DOUBLE_EQ(c.threshold_gco2_per_kwh, 250.5);
  EXPECT_EQ(c.poll_interval_ms, 60000u);
  EXPECT_EQ(c.timeout_ms, 2000u);
  EXPECT_EQ(c.max_backoff_ms, 600000u);
  const std::string dump = dump_config(*r);
  EXPECT_THAT(dump, Not(HasSubstr("em-secret-123")));
  auto again = load(dump);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->router.carbon, c);
}

TEST(ConfigCarbon, ReadsWattTime) {
  auto r = load(R"([router.carbon]
provider = "watttime"
zone = "CAISO_NORTH"
username = "me"
password_env = "WT_PASS"
signal_type = "co2_aoer"
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->router.carbon.password.reveal(), "wt-secret-456");
  EXPECT_EQ(r->router.carbon.signal_type, "co2_aoer");
  EXPECT_THAT(dump_config(*r), Not(HasSubstr("wt-secret-456")));
}

TEST(ConfigCarbon, RefusesAPercentileSignalWithAClearError) {
  const std::string e = error_of(
      "[router.carbon]\nprovider = \"watttime\"\nzone = \"CAISO_NORTH\"\nusername = "
      "\"me\"\npassword_env = \"WT_PASS\"\nsignal_type = \"signal_index\"\n");
  EXPECT_THAT(e, HasSubstr("cognitora.toml:6"));
  EXPECT_THAT(e, HasSubstr("router.carbon.signal_type"));
  EXPECT_THAT(e, HasSubstr("percentile, not a rate"));
  EXPECT_THAT(error_of("[router.carbon]\nsignal_type = \"health_damage\"\n"), HasSubstr("an emissions rate"));
}

TEST(ConfigCarbon, EachProviderNamesWhatItLacks) {
  const std::string em = error_of("[router.carbon]\nprovider = \"electricitymaps\"\n");
  EXPECT_THAT(em, HasSubstr("router.carbon.zone"));
  EXPECT_THAT(em, HasSubstr("router.carbon.token_env"));
  const std::string wt = error_of("[router.carbon]\nprovider = \"watttime\"\nzone = \"X\"\n");
  EXPECT_THAT(wt, HasSubstr("router.carbon.username"));
  EXPECT_THAT(wt, HasSubstr("router.carbon.password_env"));
  EXPECT_TRUE(load("[router.carbon]\nprovider = \"static\"\nstatic_gco2_per_kwh = 500\n").ok());
}

TEST(ConfigCarbon, BadValuesNameFileLineAndKey) {
  EXPECT_THAT(error_of("[router.carbon]\nprovider = \"carbonara\"\n"), HasSubstr("cognitora.toml:2"));
  EXPECT_THAT(error_of("[router.carbon]\nthreshold_gco2_per_kwh = -1\n"),
              HasSubstr("router.carbon.threshold_gco2_per_kwh"));
  EXPECT_THAT(error_of("[router.carbon]\npoll_interval_ms = 10\n"),
              HasSubstr("router.carbon.poll_interval_ms"));
  EXPECT_THAT(error_of("[router.carbon]\nprovider = \"static\"\nurl = \"ftp://x\"\n"),
              HasSubstr("router.carbon.url"));
  EXPECT_THAT(error_of("[router.carbon]\ntoken_env = \"NOT_SET_ANYWHERE\"\n"), HasSubstr("NOT_SET_ANYWHERE"));
}

TEST(ConfigCarbon, UnknownKeysAreRejected) {
  const std::string e = error_of("[router.carbon]\nprovider = \"static\"\nthreshold = 300\n");
  EXPECT_THAT(e, HasSubstr("cognitora.toml:3"));
  EXPECT_THAT(e, HasSubstr("router.carbon.threshold"));
}

}  // namespace
}  // namespace cgn::config
