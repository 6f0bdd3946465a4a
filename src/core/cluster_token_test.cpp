#include "core/cluster_token.h"

#include <gtest/gtest.h>

namespace cgn::auth {
namespace {

TEST(ClusterToken, none_configured_accepts_everyone_and_presents_nothing) {
  const ClusterToken t;
  EXPECT_FALSE(t.configured());
  EXPECT_EQ(t.presented(), "");
  EXPECT_TRUE(t.accepts(""));
  EXPECT_TRUE(t.accepts("anything"));
}

TEST(ClusterToken, presents_the_first_and_accepts_every_configured_token) {
  const ClusterToken t({"new-token-0123456789", "old-token-0123456789"});
  EXPECT_TRUE(t.configured());
  EXPECT_EQ(t.presented(), "new-token-0123456789");
  EXPECT_TRUE(t.accepts("new-token-0123456789"));
  EXPECT_TRUE(t.accepts("old-token-0123456789"));
  EXPECT_FALSE(t.accepts(""));
  EXPECT_FALSE(t.accepts("new-token-012345678"));    // a prefix
  EXPECT_FALSE(t.accepts("new-token-01234567890"));  // longer
  EXPECT_FALSE(t.accepts("new-token-0123456788"));   // last byte differs
}

}  // namespace
}  // namespace cgn::auth
