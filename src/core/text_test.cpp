#include "core/text.h"

#include <gtest/gtest.h>

namespace cgn::text {
namespace {

TEST(Text, TrimDropsOptionalWhitespaceAtBothEnds) {
  EXPECT_EQ(trim(" \tvalue \t"), "value");
  EXPECT_EQ(trim("a b"), "a b");
  EXPECT_EQ(trim(" \t "), "");
  EXPECT_EQ(trim("\r\nx\r\n", "\r\n"), "x");
}

TEST(Text, IequalsIgnoresAsciiCaseOnly) {
  EXPECT_TRUE(iequals("Content-Length", "content-length"));
  EXPECT_TRUE(iequals("", ""));
  EXPECT_FALSE(iequals("content-length", "content-lengths"));
  EXPECT_FALSE(iequals("a", "b"));
  EXPECT_FALSE(iequals("\xC3\x80", "\xC3\xA0"));  // no Unicode folding: bytes outside A-Z compare as is
  static_assert(iequals("ABC", "abc"));
}

TEST(Text, IstartsWithMatchesAPrefixInAnyCase) {
  EXPECT_TRUE(istarts_with("Text/Event-Stream; charset=utf-8", "text/event-stream"));
  EXPECT_TRUE(istarts_with("abc", ""));
  EXPECT_FALSE(istarts_with("text/event", "text/event-stream"));
  EXPECT_FALSE(istarts_with("application/json", "text/event-stream"));
}

}  // namespace
}  // namespace cgn::text
