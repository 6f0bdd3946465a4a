#include "cluster/state_store.h"

#include <gtest/gtest.h>

namespace cgn::cluster {
namespace {

TEST(NodeUrl, ParsesSchemeHostPortAndBasePath) {
  auto a = parse_node_url("http://127.0.0.1:8001");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8001);
  EXPECT_FALSE(a->tls);
  EXPECT_EQ(a->base_path, "");
  auto b = parse_node_url("https://engine.local/vllm/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->port, 443);
  EXPECT_TRUE(b->tls);
  EXPECT_EQ(b->base_path, "/vllm");
  auto c = parse_node_url("http://[::1]:9000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
}

TEST(NodeUrl, RejectsWhatCannotBeANode) {
  for (const char* bad : {"ftp://x", "127.0.0.1:80", "http://", "http://h:0", "http://h:99999", "http://h:8x",
                          "http://u:p@h:80", "http://h/?q=1", "http://[::1"}) {
    auto r = parse_node_url(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
    }
  }
}

}  // namespace
}  // namespace cgn::cluster
