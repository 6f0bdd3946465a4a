#include "core/host_port.h"

#include <gtest/gtest.h>

namespace cgn {
namespace {

TEST(SplitHostPort, HostAndPort) {
  auto hp = split_host_port("127.0.0.1:8080");
  ASSERT_TRUE(hp.has_value());
  EXPECT_EQ(hp->first, "127.0.0.1");
  EXPECT_EQ(hp->second, 8080);
  hp = split_host_port("node-a.example:0");
  ASSERT_TRUE(hp.has_value());
  EXPECT_EQ(hp->first, "node-a.example");
  EXPECT_EQ(hp->second, 0);
}

TEST(SplitHostPort, BracketedIpv6) {
  auto hp = split_host_port("[::1]:9091");
  ASSERT_TRUE(hp.has_value());
  EXPECT_EQ(hp->first, "::1");
  EXPECT_EQ(hp->second, 9091);
}

TEST(SplitHostPort, RejectsMalformed) {
  for (const char* bad : {"", "8080", ":8080", "host:", "host:port", "host:65536", "host:-1", "host:80x",
                          "[]:80", "host:99999999999"}) {
    EXPECT_FALSE(split_host_port(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace cgn
