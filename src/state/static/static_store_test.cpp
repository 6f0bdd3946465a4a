#include "state/static/static_store.h"

#include <gtest/gtest.h>

namespace cgn::state {
namespace {

TEST(StaticStore, DefaultNodeNameIsTheUrlsHostAndPort) {
  auto c = cluster::parse_node_url("http://[::1]:9000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(default_node_name(*c), "[::1]:9000");
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
