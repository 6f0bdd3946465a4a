// [router.cascade] keys: an alias read with its steps, the rules that span steps, bad values and
// unknown keys named with file, line and key, and the dump reading back.
#include "core/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/config_env.h"

namespace cgn::config {
namespace {

using ::testing::HasSubstr;

Result<CognitoraConfig, ConfigError> load(std::string_view text) {
  return cgn::testing::load_toml(text);
}
std::string error_of(std::string_view text) {
  return cgn::testing::load_error(text);
}

constexpr const char* kGood = R"([router.cascade.aliases."auto"]
deadline_reserve_ms = 400
[[router.cascade.aliases."auto".steps]]
model = "small"
statistic = "min"
threshold = -1.5
first_tokens = 16
[[router.cascade.aliases."auto".steps]]
model = "medium"
threshold = -0.5
[[router.cascade.aliases."auto".steps]]
model = "large"
)";

TEST(ConfigCascade, NoAliasesByDefault) {
  auto r = load("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->router.cascade.aliases.empty());
}

TEST(ConfigCascade, ReadsAnAliasAndItsSteps) {
  auto r = load(kGood);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CascadeAliasConfig& a = r->router.cascade.aliases.at("auto");
  EXPECT_EQ(a.deadline_reserve_ms, 400u);
  ASSERT_EQ(a.steps.size(), 3u);
  EXPECT_EQ(a.steps[0].model, "small");
  EXPECT_EQ(a.steps[0].statistic, "min");
  EXPECT_DOUBLE_EQ(*a.steps[0].threshold, -1.5);
  EXPECT_EQ(*a.steps[0].first_tokens, 16u);
  EXPECT_EQ(a.steps[1].statistic, "");  // the default, mean
  EXPECT_FALSE(a.steps[1].first_tokens.has_value());
  EXPECT_EQ(a.steps[2].model, "large");
  EXPECT_FALSE(a.steps[2].threshold.has_value());
}

TEST(ConfigCascade, TheDumpReadsBack) {
  auto r = load(kGood);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto again = load(dump_config(*r));
  ASSERT_TRUE(again.ok()) << again.error().message << "\n" << dump_config(*r);
  EXPECT_EQ(again->router.cascade, r->router.cascade);
}

TEST(ConfigCascade, RulesAcrossStepsNameTheFileLineAndKey) {
  EXPECT_THAT(error_of("[router.cascade.aliases.a]\n[[router.cascade.aliases.a.steps]]\nmodel = \"x\"\n"),
              HasSubstr("cognitora.toml:2:"));
  EXPECT_THAT(error_of("[router.cascade.aliases.a]\n[[router.cascade.aliases.a.steps]]\nmodel = \"x\"\n"),
              HasSubstr("at least two steps"));
  EXPECT_THAT(error_of("[router.cascade.aliases.a]\ndeadline_reserve_ms = 1\n"),
              HasSubstr("'router.cascade.aliases.a.steps'"));
  const std::string no_threshold = error_of(R"([[router.cascade.aliases.a.steps]]
model = "x"
[[router.cascade.aliases.a.steps]]
model = "y"
)");
  EXPECT_THAT(no_threshold, HasSubstr("steps[0]: 'threshold' is required"));
  EXPECT_THAT(no_threshold, HasSubstr("cognitora.toml:1:"));
  EXPECT_THAT(error_of(R"([[router.cascade.aliases.a.steps]]
model = "x"
threshold = -1
[[router.cascade.aliases.a.steps]]
model = "y"
threshold = -1
)"),
              HasSubstr("steps[1] is the last step"));
  EXPECT_THAT(error_of(R"([[router.cascade.aliases.a.steps]]
model = "x"
threshold = -1
[[router.cascade.aliases.a.steps]]
model = "x"
)"),
              HasSubstr("appears twice"));
}

TEST(ConfigCascade, BadValuesAndUnknownKeysAreRefused) {
  const auto with_step = [](const std::string& line) {
    return "[[router.cascade.aliases.a.steps]]\nmodel = \"x\"\n" + line +
           "\n[[router.cascade.aliases.a.steps]]\nmodel = \"y\"\n";
  };
  EXPECT_THAT(error_of(with_step("threshold = 0.5")), HasSubstr("cognitora.toml:3:"));
  EXPECT_THAT(error_of(with_step("threshold = 0.5")),
              HasSubstr("router.cascade.aliases.a.steps[0].threshold"));
  EXPECT_THAT(error_of(with_step("threshold = -1\nstatistic = \"median\"")),
              HasSubstr("router.cascade.aliases.a.steps[0].statistic"));
  EXPECT_THAT(error_of(with_step("threshold = -1\nfirst_tokens = -3")),
              HasSubstr("router.cascade.aliases.a.steps[0].first_tokens"));
  EXPECT_THAT(error_of(with_step("threshold = -1\ntreshold = -2")), HasSubstr("unknown key"));
  EXPECT_THAT(error_of(with_step("threshold = -1\ntreshold = -2")),
              HasSubstr("router.cascade.aliases.a.steps[0].treshold"));
  EXPECT_THAT(error_of("[router.cascade]\nalias = 1\n"), HasSubstr("router.cascade.alias"));
  EXPECT_THAT(error_of("[[router.cascade.aliases.a.steps]]\nmodel = \"\"\n"), HasSubstr("must not be empty"));
}

}  // namespace
}  // namespace cgn::config
