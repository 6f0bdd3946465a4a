#include "router/carbon/poller.h"

#include <gtest/gtest.h>

#include "core/config.h"
#include "router/carbon/providers.h"

namespace cgn::router::carbon {
namespace {

TEST(PollerBackoff, doubles_from_the_interval_up_to_the_cap) {
  PollerOptions o;
  o.interval = 10 * kNanosPerSecond;
  o.max_backoff = 60 * kNanosPerSecond;
  EXPECT_EQ(next_delay(o, 0, 0), 10 * kNanosPerSecond);
  EXPECT_EQ(next_delay(o, 1, 0), 10 * kNanosPerSecond);
  EXPECT_EQ(next_delay(o, 2, 0), 20 * kNanosPerSecond);
  EXPECT_EQ(next_delay(o, 3, 0), 40 * kNanosPerSecond);
  EXPECT_EQ(next_delay(o, 4, 0), 60 * kNanosPerSecond);
  EXPECT_EQ(next_delay(o, 1000, 0), 60 * kNanosPerSecond);
}

TEST(PollerBackoff, a_retry_after_longer_than_the_backoff_wins) {
  PollerOptions o;
  o.interval = 10 * kNanosPerSecond;
  o.max_backoff = 60 * kNanosPerSecond;
  EXPECT_EQ(next_delay(o, 1, 120), 120 * kNanosPerSecond);
  EXPECT_EQ(next_delay(o, 2, 5), 20 * kNanosPerSecond);
}

TEST(ProviderRegistry, knows_every_provider_the_config_accepts) {
  std::vector<std::string_view> expected;
  for (std::string_view n : config::kCarbonProviders) {
    if (n != "off") {
      expected.push_back(n);
    }
  }
  EXPECT_EQ(provider_names(), expected);
  config::CarbonConfig c;
  for (std::string_view n : expected) {
    c.provider = std::string(n);
    auto p = make_provider(c);
    ASSERT_TRUE(p.ok()) << n;
    EXPECT_EQ((*p)->name(), n);
  }
  c.provider = "off";
  EXPECT_FALSE(make_provider(c).ok());
  c.provider = "electricitymaps";
  c.url = "ftp://x";
  EXPECT_FALSE(make_provider(c).ok());
}

TEST(ProviderAuth, basic_auth_is_base64_of_user_colon_password) {
  EXPECT_EQ(basic_auth("user", "pass"), "Basic dXNlcjpwYXNz");
  EXPECT_EQ(basic_auth("a", ""), "Basic YTo=");
}

}  // namespace
}  // namespace cgn::router::carbon
