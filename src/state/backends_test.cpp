#include "state/backends.h"

#include <gtest/gtest.h>

#include "state/static/static_backend.h"

namespace cgn::state {
namespace {

TEST(StateBackends, registers_static_etcd_and_gossip_by_name) {
  const auto& reg = builtin_backends();
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"static", "etcd", "gossip"}));
  for (const auto& name : reg.names()) {
    auto b = reg.find(name);
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ((*b)->name, name);
    EXPECT_TRUE((*b)->make_store);
    EXPECT_TRUE((*b)->make_publisher);
  }
}

TEST(StateBackends, an_unknown_name_is_a_config_error_listing_the_registered_ones) {
  auto b = builtin_backends().find("consul");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, cluster::StateError::kConfig);
  EXPECT_NE(b.error().message.find("\"consul\""), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("static, etcd, gossip"), std::string::npos) << b.error().message;
}

TEST(StateBackends, a_second_backend_of_the_same_name_or_one_without_a_store_or_publisher_is_refused) {
  cluster::BackendRegistry reg;
  ASSERT_TRUE(reg.add(static_backend()).ok());
  auto again = reg.add(static_backend());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("twice"), std::string::npos);
  EXPECT_FALSE(reg.add(cluster::Backend{.name = "x", .make_store = {}, .make_publisher = {}}).ok());
  auto no_publisher = static_backend();
  no_publisher.name = "y";
  no_publisher.make_publisher = {};
  EXPECT_FALSE(reg.add(no_publisher).ok());
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"static"}));
}

TEST(StateBackends, the_static_publisher_publishes_nothing_and_says_routers_poll) {
  config::CognitoraConfig cfg;
  auto b = builtin_backends().find("static");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->make_publisher);
  auto p =
      (*b)->make_publisher({.config = cfg, .node_id = "n", .record = [] { return cluster::NodeRecord{}; }});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_FALSE((*p)->carries_prefixes());
  EXPECT_EQ((*p)->backend(), "static");
  EXPECT_NE((*p)->describe().find("poll"), std::string::npos);
  EXPECT_TRUE((*p)->start().ok());
  (*p)->stop();
}

TEST(StateBackends, the_etcd_publisher_carries_prefixes_and_counts_withdrawals) {
  config::CognitoraConfig cfg;
  cfg.state.etcd.endpoints = {"http://127.0.0.1:1"};
  auto b = builtin_backends().find("etcd");
  ASSERT_TRUE(b.ok());
  auto p =
      (*b)->make_publisher({.config = cfg, .node_id = "n1", .record = [] { return cluster::NodeRecord{}; }});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE((*p)->carries_prefixes());
  EXPECT_EQ((*p)->backend(), "etcd");
  (*p)->withdraw({.all = true});
  (*p)->withdraw({});
  EXPECT_EQ((*p)->withdrawal_stats().clears, 1u);
  EXPECT_EQ((*p)->withdrawal_stats().withdrawals, 0u);
}

TEST(StateBackends, the_etcd_publisher_refuses_a_node_id_etcd_keys_cannot_hold) {
  config::CognitoraConfig cfg;
  auto b = builtin_backends().find("etcd");
  ASSERT_TRUE(b.ok());
  auto p =
      (*b)->make_publisher({.config = cfg, .node_id = "a/b", .record = [] { return cluster::NodeRecord{}; }});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, cluster::StateError::kConfig);
  EXPECT_NE(p.error().message.find("node id \"a/b\""), std::string::npos) << p.error().message;
}

TEST(StateBackends, stores_refuse_a_config_they_cannot_use) {
  config::CognitoraConfig cfg;
  cfg.router.nodes.push_back({});
  cfg.router.nodes.back().url = "http://127.0.0.1:1";
  for (const char* name : {"etcd", "gossip"}) {
    auto b = builtin_backends().find(name);
    ASSERT_TRUE(b.ok());
    auto s = (*b)->make_store({.config = cfg, .poll_interval = std::chrono::milliseconds(1000)});
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_NE(s.error().message.find("[[router.nodes]]"), std::string::npos) << s.error().message;
  }
}

// Gossip on loopback, unsigned (the tests' setting; a keyless config is refused otherwise).
config::CognitoraConfig loopback_gossip() {
  config::CognitoraConfig cfg;
  cfg.state.gossip.listen = "127.0.0.1:0";
  cfg.state.gossip.insecure = true;
  return cfg;
}

TEST(StateBackends, the_gossip_publisher_gossips_the_record_and_refuses_a_keyless_config) {
  auto b = builtin_backends().find("gossip");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->make_publisher);
  const config::CognitoraConfig keyless;
  auto refused = (*b)->make_publisher({.config = keyless, .node_id = "gpu-1", .record = [] {
                                         return cluster::NodeRecord{
                                             .node_id = "gpu-1", .address = "127.0.0.1:1", .engine = "vllm"};
                                       }});
  ASSERT_TRUE(refused.ok());
  auto st = (*refused)->start();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, cluster::StateError::kConfig);
  EXPECT_NE(st.error().message.find("secret_env"), std::string::npos) << st.error().message;

  const auto cfg = loopback_gossip();
  auto p = (*b)->make_publisher({.config = cfg, .node_id = "gpu-1", .record = [] {
                                   return cluster::NodeRecord{
                                       .node_id = "gpu-1", .address = "127.0.0.1:1", .engine = "vllm"};
                                 }});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_FALSE((*p)->carries_prefixes());
  EXPECT_EQ((*p)->backend(), "gossip");
  auto started = (*p)->start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  (*p)->stop();
}

TEST(StateBackends, a_stores_own_metrics_attach_through_the_interface) {
  const auto cfg = loopback_gossip();
  metrics::Registry reg;  // outlives the store, as attach_metrics() requires
  auto b = builtin_backends().find("gossip");
  ASSERT_TRUE(b.ok());
  auto store = (*b)->make_store({.config = cfg, .poll_interval = std::chrono::milliseconds(1000)});
  ASSERT_TRUE(store.ok()) << store.error().message;
  cluster::StateStore& base = **store;
  base.attach_metrics(reg);
  EXPECT_NE(reg.render().find("cgn_gossip_"), std::string::npos);
}

}  // namespace
}  // namespace cgn::state
