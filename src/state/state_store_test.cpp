#include "state/state_store.h"

#include <gtest/gtest.h>

#include "state/static_store.h"

namespace cgn::state {
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
  EXPECT_EQ(default_node_name(*c), "[::1]:9000");
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

TEST(StaticStore, RejectsDuplicateNamesAndUnknownEngines) {
  StaticStoreOptions o;
  o.nodes = {{"", "http://127.0.0.1:8001"}, {"", "http://127.0.0.1:8001"}};
  auto dup = StaticStore::create(o);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().message, "node name \"127.0.0.1:8001\" is used twice");
  StaticStoreOptions e;
  StaticNodeSpec spec{"x", "http://127.0.0.1:8001"};
  spec.engine = "warp-drive";
  e.nodes = {spec};
  EXPECT_FALSE(StaticStore::create(e).ok());
}

}  // namespace
}  // namespace cgn::state
