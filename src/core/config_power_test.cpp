// [power] and [[power.sources]]: every key read, per-kind requirements and unique names as errors
// naming file, line and key, unknown keys rejected, the password only as its variable's name, and
// the dump reading back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config.h"
#include "testing/config_env.h"

namespace cgn::config {
namespace {

using ::testing::HasSubstr;

const EnvLookup kEnv = cgn::testing::map_env({{"BMC_PASSWORD", "hunter2"}});

Result<CognitoraConfig, ConfigError> load(std::string_view text) {
  return cgn::testing::load_toml(text, kEnv);
}
std::string error_of(std::string_view text) {
  return cgn::testing::load_error(text, kEnv);
}

constexpr std::string_view kFull = R"([power]
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
poll_interval_ms = 250

[[power.sources]]
kind = "nvml"

[[power.sources]]
name = "gpus"
kind = "dcgm_exporter"
url = "http://127.0.0.1:9400/metrics"

[[power.sources]]
name = "bmc"
kind = "redfish"
url = "https://10.0.0.5"
device = "Self"
redfish_schema = "environment"
auth = "session"
username = "admin"
password_env = "BMC_PASSWORD"
ca_file = "/etc/cognitora/bmc-ca.pem"
timeout_ms = 5000

[[power.sources]]
name = "fans"
kind = "static"
watts = 45.5

[[power.sources]]
name = "daemon"
kind = "cgn_power"
target = "127.0.0.1:9460"
)";

TEST(ConfigPower, ReadsEveryKeyAndNamesSourcesByKindByDefault) {
  auto r = load(kFull);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const PowerConfig& p = r->power;
  EXPECT_EQ(p.listen, "127.0.0.1:0");
  EXPECT_EQ(p.poll_interval_ms, 250u);
  ASSERT_EQ(p.sources.size(), 5u);
  EXPECT_EQ(p.sources[0].name, "nvml");
  EXPECT_EQ(p.sources[1].url, "http://127.0.0.1:9400/metrics");
  EXPECT_EQ(p.sources[2].auth, "session");
  EXPECT_EQ(p.sources[2].redfish_schema, "environment");
  EXPECT_EQ(p.sources[2].password.reveal(), "hunter2");
  EXPECT_EQ(p.sources[2].timeout_ms, 5000u);
  EXPECT_EQ(p.sources[2].ca_file, "/etc/cognitora/bmc-ca.pem");
  EXPECT_DOUBLE_EQ(p.sources[3].watts, 45.5);
  EXPECT_EQ(p.sources[4].kind, "cgn_power");
  EXPECT_EQ(p.sources[4].target, "127.0.0.1:9460");
}

TEST(ConfigPower, DumpShowsTheVariableNotThePasswordAndReadsBack) {
  auto r = load(kFull);
  ASSERT_TRUE(r.ok());
  std::string dump = dump_config(r.value());
  EXPECT_THAT(dump, HasSubstr("BMC_PASSWORD"));
  EXPECT_EQ(dump.find("hunter2"), std::string::npos);
  auto again = load(dump);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->power, r->power);
}

TEST(ConfigPower, KindIsRequiredAndMustBeKnown) {
  EXPECT_THAT(error_of("[[power.sources]]\nname = \"x\"\n"), HasSubstr("kind"));
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"nvidia-smi\"\n"), HasSubstr("cognitora.toml:2"));
}

TEST(ConfigPower, UrlAndWattsAreRequiredWhereTheKindNeedsThem) {
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"dcgm_exporter\"\n"), HasSubstr("url"));
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"redfish\"\n"), HasSubstr("url"));
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"static\"\n"), HasSubstr("watts"));
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"cgn_power\"\n"), HasSubstr("target"));
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"cgn_power\"\ntarget = \"no-port\"\n"),
              HasSubstr("cognitora.toml:3"));
}

TEST(ConfigPower, DuplicateSourceNamesAreRejected) {
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"rapl\"\n[[power.sources]]\nkind = \"rapl\"\n"),
              HasSubstr("duplicates source name \"rapl\""));
}

TEST(ConfigPower, UnknownKeysAreRejected) {
  EXPECT_THAT(error_of("[power]\npoll_ms = 5\n"), HasSubstr("poll_ms"));
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"rapl\"\nroot = \"/x\"\n"), HasSubstr("root"));
}

TEST(ConfigPower, UsernameWithoutPasswordIsAnError) {
  EXPECT_THAT(error_of("[[power.sources]]\nkind = \"redfish\"\nurl = \"http://b\"\nusername = \"u\"\n"),
              HasSubstr("password_env"));
}

}  // namespace
}  // namespace cgn::config
