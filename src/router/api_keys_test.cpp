#include "router/api_keys.h"

#include <gtest/gtest.h>

#include "testing/process.h"

namespace cgn::router {
namespace {

constexpr const char* kKey = "sk-test-0123456789abcdef";

TEST(ApiKeys, ParsesKeysSkippingCommentsBlankLinesAndSpaces) {
  auto keys =
      ApiKeys::parse("# comment\n\n  sk-test-0123456789abcdef \r\nsk-other-0123456789abcdef\n", "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->check_token(kKey));
  EXPECT_TRUE(keys->check_token("sk-other-0123456789abcdef"));
  EXPECT_FALSE(keys->check_token("sk-test-0123456789abcdeX"));
  EXPECT_FALSE(keys->check_token(""));
}

TEST(ApiKeys, AuthorizationNeedsTheBearerSchemeAndAKnownKey) {
  auto keys = ApiKeys::parse(kKey, "k");
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->check_authorization(std::string("Bearer ") + kKey));
  EXPECT_TRUE(keys->check_authorization(std::string("bearer  ") + kKey));
  EXPECT_FALSE(keys->check_authorization(kKey));
  EXPECT_FALSE(keys->check_authorization(std::string("Basic ") + kKey));
  EXPECT_FALSE(keys->check_authorization(""));
  EXPECT_FALSE(keys->check_authorization("Bearer "));
}

TEST(ApiKeys, NoKeysMeansOpen) {
  ApiKeys keys;
  EXPECT_FALSE(keys.enabled());
  EXPECT_TRUE(keys.check_authorization(""));
}

TEST(ApiKeys, BadKeysAreRejectedWithTheLineButNeverTheKey) {
  auto short_key = ApiKeys::parse("# c\nshort\n", "keys.txt");
  ASSERT_FALSE(short_key.ok());
  EXPECT_EQ(short_key.error().message, "keys.txt:2: key shorter than 16 bytes");
  auto spaced = ApiKeys::parse("sk-has a-space-0123456789\n", "keys.txt");
  ASSERT_FALSE(spaced.ok());
  EXPECT_EQ(spaced.error().message.find("sk-has"), std::string::npos);
  EXPECT_NE(spaced.error().message.find("keys.txt:1:"), std::string::npos);
  KeysLimits few;
  few.max_keys = 1;
  auto many = ApiKeys::parse("sk-a-0123456789abcdef\nsk-b-0123456789abcdef\n", "k", few);
  EXPECT_FALSE(many.ok());
}

TEST(ApiKeys, EnvironmentKeysFollowTheSameRules) {
  ApiKeys keys;
  EXPECT_TRUE(keys.add({kKey}, "env CGN_KEYS").ok());
  EXPECT_TRUE(keys.check_token(kKey));
  auto st = keys.add({"tiny"}, "env CGN_KEYS");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "env CGN_KEYS key #1: key shorter than 16 bytes");
}

TEST(ApiKeys, LoadsAFileAndNamesAMissingOne) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("keys"), std::string(kKey) + "\n");
  auto keys = ApiKeys::load_file(dir.file("keys"));
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->check_token(kKey));
  auto missing = ApiKeys::load_file(dir.file("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, KeysError::kRead);
}

TEST(ApiKeys, BearerTokenExtraction) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("  BEARER   abc  "), "abc");
  EXPECT_EQ(bearer_token("Token abc"), "");
  EXPECT_EQ(bearer_token("Bear"), "");
}

}  // namespace
}  // namespace cgn::router
