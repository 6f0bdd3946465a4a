#include "state/etcd/keys.h"

#include <gtest/gtest.h>

namespace cgn::etcd::keys {
namespace {

Digest sample_digest() {
  Digest d{};
  for (size_t i = 0; i < d.size(); ++i) {
    d[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  return d;
}

TEST(Keys, layout_matches_the_documented_paths) {
  EXPECT_EQ(node_key("gpu-01"), "/cognitora/nodes/gpu-01");
  EXPECT_EQ(cordon_key("gpu-01"), "/cognitora/cordon/gpu-01");
  EXPECT_EQ(kv_prefix("gpu-01"), "/cognitora/kv/gpu-01/");
  EXPECT_EQ(kv_key("gpu-01", sample_digest()), "/cognitora/kv/gpu-01/" + to_hex(sample_digest()));
  EXPECT_EQ(std::string(kPolicyKey), "/cognitora/policy");
}

TEST(Keys, node_ids_with_slash_or_nul_are_rejected) {
  EXPECT_TRUE(check_node_id("gpu-01").ok());
  EXPECT_FALSE(check_node_id("").ok());
  EXPECT_FALSE(check_node_id("a/b").ok());
  EXPECT_FALSE(check_node_id(std::string("a\0b", 3)).ok());
}

TEST(Keys, one_nodes_kv_prefix_never_covers_anothers) {
  // "gpu-1/" is not a prefix of "gpu-10/...": the trailing slash separates them.
  EXPECT_FALSE(kv_key("gpu-10", sample_digest()).starts_with(kv_prefix("gpu-1")));
}

TEST(Keys, parses_kv_keys_back) {
  auto parsed = parse_kv_key(kv_key("n1", sample_digest()));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->first, "n1");
  EXPECT_EQ(parsed->second, sample_digest());
}

TEST(Keys, rejects_malformed_kv_keys) {
  const std::string hex = to_hex(sample_digest());
  EXPECT_FALSE(parse_kv_key("/cognitora/kv/n1").has_value());
  EXPECT_FALSE(parse_kv_key("/cognitora/kv/n1/" + hex.substr(1)).has_value());
  EXPECT_FALSE(parse_kv_key("/cognitora/kv/n1/" + hex + "0").has_value());
  EXPECT_FALSE(parse_kv_key("/cognitora/kv//" + hex).has_value());
  std::string upper = hex;
  upper[0] = 'G';
  EXPECT_FALSE(parse_kv_key("/cognitora/kv/n1/" + upper).has_value());
  EXPECT_FALSE(parse_kv_key("/cognitora/nodes/n1").has_value());
}

TEST(Keys, node_of_takes_the_id_under_a_prefix) {
  EXPECT_EQ(node_of("/cognitora/nodes/gpu-01", kNodesPrefix).value(), "gpu-01");
  EXPECT_FALSE(node_of("/cognitora/nodes/a/b", kNodesPrefix).has_value());
  EXPECT_FALSE(node_of("/cognitora/nodes/", kNodesPrefix).has_value());
  EXPECT_FALSE(node_of("/cognitora/cordon/x", kNodesPrefix).has_value());
}

}  // namespace
}  // namespace cgn::etcd::keys
