// Choosing the state backend: --etcd / [state.etcd] on the command line and in the file.
#include "router/state_backend.h"

#include <gtest/gtest.h>

#include "router/options.h"
#include "testing/process.h"

namespace cgn::router {
namespace {

Result<RouterSetup, OptionsError> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "cgn-router");
  return parse_router_options(static_cast<int>(args.size()), args.data(), "/nonexistent/bin", "/nonexistent");
}

TEST(StateBackendOptions, EtcdFlagSelectsTheEtcdBackend) {
  auto s = parse({"--etcd", "http://127.0.0.1:2379", "--etcd", "127.0.0.1:2380", "--etcd-prefix", "/lab"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->config.router.state_backend, "etcd");
  EXPECT_EQ(s->gateway.router.state_backend, "etcd");
  EXPECT_EQ(s->config.state.etcd.endpoints,
            (std::vector<std::string>{"http://127.0.0.1:2379", "127.0.0.1:2380"}));
  EXPECT_EQ(s->config.state.etcd.prefix, "/lab");
  auto store = make_state_store(s->config, s->poll_interval);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ((*store)->backend(), "etcd");
}

TEST(StateBackendOptions, EtcdWithStaticNodesOrABadPrefixIsAUsageError) {
  auto a = parse({"--etcd", "http://127.0.0.1:2379", "--node", "http://127.0.0.1:8001"});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("takes its nodes from etcd"), std::string::npos) << a.error().message;
  auto b = parse({"--etcd", "http://127.0.0.1:2379", "--etcd-prefix", "lab"});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("--etcd-prefix"), std::string::npos) << b.error().message;
}

TEST(StateBackendOptions, ConfigFileSelectsEtcdOrGossip) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("e.toml"), R"([router]
state_backend = "etcd"
[state.etcd]
endpoints = ["http://127.0.0.1:2379"]
)");
  const std::string e = dir.file("e.toml");
  auto s = parse({"--config", e.c_str()});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->config.router.state_backend, "etcd");
  cgn::testing::write_file(dir.file("g.toml"), "[router]\nstate_backend = \"gossip\"\n");
  const std::string g = dir.file("g.toml");
  auto t = parse({"--config", g.c_str()});
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->config.router.state_backend, "gossip");
}

TEST(StateBackendOptions, StaticStaysTheDefault) {
  auto s = parse({"--node", "http://127.0.0.1:8001"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto store = make_state_store(s->config, s->poll_interval);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ((*store)->backend(), "static");
}

TEST(StateBackendOptions, StaticMaxStalenessMustExceedThePollPeriod) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("r.toml"), R"([router.timeouts]
health_interval_ms = 2000
[router.routing]
max_staleness_ms = 1500
)");
  const std::string r = dir.file("r.toml");
  auto s = parse({"--config", r.c_str(), "--node", "http://127.0.0.1:8001"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto store = make_state_store(s->config, s->poll_interval);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("max_staleness_ms = 1500 must exceed the poll period (2000 ms"),
            std::string::npos)
      << store.error().message;
  // A faster poll makes it valid; 0 turns the rule off.
  auto fast = parse({"--config", r.c_str(), "--node", "http://127.0.0.1:8001", "--poll-interval-ms", "500"});
  ASSERT_TRUE(fast.ok());
  EXPECT_TRUE(make_state_store(fast->config, fast->poll_interval).ok());
  s->config.router.routing.max_staleness_ms = 0;
  EXPECT_TRUE(make_state_store(s->config, s->poll_interval).ok());
}

}  // namespace
}  // namespace cgn::router
