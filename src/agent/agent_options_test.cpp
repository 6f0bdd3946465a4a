#include "agent/agent_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/process.h"

namespace cgn::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class AgentOptions : public ::testing::Test {
 protected:
  // cgn-agent --config <a file with `toml`> ARGS...
  CliResult<AgentSetup> parse(const std::string& toml, std::vector<const char*> args) {
    const std::string cfg = dir_.file("cognitora.toml");
    cgn::testing::write_file(cfg, toml);
    args.insert(args.begin(), {"cgn-agent", "--config", cfg.c_str()});
    return parse_agent_options(static_cast<int>(args.size()), args.data());
  }
  static constexpr const char* kVllm = "[engine]\nkind = \"vllm\"\nmodel = \"m\"\nport = 8100\n";

  cgn::testing::TempDir dir_;
};

TEST_F(AgentOptions, help_is_status_0_with_the_flags) {
  const char* argv[] = {"cgn-agent", "--help"};
  auto s = parse_agent_options(2, argv);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, 0);
  EXPECT_THAT(s.error().message, HasSubstr("--config"));
  EXPECT_THAT(s.error().message, HasSubstr("--print-record"));
}

TEST_F(AgentOptions, an_unknown_flag_is_status_2_with_the_help) {
  auto s = parse(kVllm, {"--no-such-flag"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, 2);
  EXPECT_THAT(s.error().message, StartsWith("cgn-agent: "));
  EXPECT_THAT(s.error().message, HasSubstr("--no-such-flag"));
  EXPECT_THAT(s.error().message, HasSubstr("--config"));
}

TEST_F(AgentOptions, bad_values_name_their_flag) {
  const std::vector<std::pair<std::vector<const char*>, std::string>> cases = {
      {{"--listen", "8080"}, "--listen \"8080\" is not HOST:PORT"},
      {{"--grpc-listen", "9091"}, "--grpc-listen \"9091\" is not HOST:PORT"},
      {{"--state-backend", "zookeeper"}, "--state-backend \"zookeeper\" is not one of"},
      {{"--etcd-prefix", "lab"}, "--etcd-prefix \"lab\" must start with '/'"},
      {{"--publish-interval-ms", "5"}, "--publish-interval-ms must be in [10, 60000]"},
      {{"--lease-ttl-s", "1"}, "--lease-ttl-s must be in [2, 3600]"},
      {{"--role", "both-ways"}, "--role \"both-ways\" is not one of prefill, decode, both"},
      {{"--kv-offload", "disk"}, "--kv-offload \"disk\" is not one of"},
      {{"--nixl-side-channel-port", "70000"}, "--nixl-side-channel-port must be at most 65535"},
  };
  for (const auto& [args, message] : cases) {
    auto s = parse(kVllm, args);
    ASSERT_FALSE(s.ok()) << args[0];
    EXPECT_EQ(s.error().code, 2) << args[0];
    EXPECT_THAT(s.error().message, HasSubstr(message));
    EXPECT_THAT(s.error().message, StartsWith("cgn-agent: "));
  }
}

TEST_F(AgentOptions, flags_override_the_file_and_the_engine_keys_fill_the_rest) {
  auto s =
      parse(std::string("[agent]\nlisten = \"0.0.0.0:9000\"\n[state.etcd]\nendpoints = [\"http://x:1\"]\n") +
                kVllm + "role = \"decode\"\nparallel_slots = 7\n",
            {"--listen",
             "127.0.0.1:9100",
             "--node-id",
             "n7",
             "--state-backend",
             "etcd",
             "--etcd-endpoints",
             "http://a:2379,,http://b:2379",
             "--etcd-prefix",
             "/lab",
             "--publish-interval-ms",
             "100",
             "--lease-ttl-s",
             "9",
             "--grpc-listen",
             "127.0.0.1:0",
             "--no-engine-metrics",
             "--nixl-side-channel-port",
             "5559",
             "--kv-offload",
             "lmcache"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->config.agent.listen, "127.0.0.1:9100");
  EXPECT_EQ(s->config.agent.node_id, "n7");
  EXPECT_EQ(s->config.agent.state_backend, "etcd");
  EXPECT_EQ(s->config.state.etcd.endpoints, (std::vector<std::string>{"http://a:2379", "http://b:2379"}));
  EXPECT_EQ(s->config.state.etcd.prefix, "/lab");
  EXPECT_EQ(s->config.agent.publish_interval_ms, 100u);
  EXPECT_EQ(s->config.state.etcd.lease_ttl_s, 9u);
  EXPECT_EQ(s->config.agent.grpc_listen, "127.0.0.1:0");
  EXPECT_FALSE(s->config.agent.engine_metrics);
  EXPECT_EQ(s->driver, "vllm");
  EXPECT_EQ(s->launch.role, routing::NodeRole::kDecode);  // [engine] role
  EXPECT_EQ(s->launch.kv_offload, KvOffload::kLmcache);
  EXPECT_EQ(s->launch.nixl_side_channel_port, 5559);
  EXPECT_EQ(s->launch.parallel_slots, 7u);  // [engine] parallel_slots
}

TEST_F(AgentOptions, the_kvcached_section_gives_the_engine_its_kvcached_target_and_socket) {
  auto s = parse(std::string(kVllm) +
                     "kv_offload = \"cgn\"\n[kvcached]\nlisten = \"0.0.0.0:9555\"\n"
                     "socket = \"/tmp/k.sock\"\n",
                 {});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->launch.kvcached_target, "127.0.0.1:9555");
  EXPECT_EQ(s->launch.kvcached_socket, "/tmp/k.sock");
  auto d = parse(kVllm, {});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->launch.kvcached_target, "127.0.0.1:9400");  // [kvcached] defaults
  EXPECT_EQ(d->launch.kvcached_socket, "/run/cognitora/kvcached.sock");
}

TEST(KvcachedTarget, WildcardHostsBecomeLoopback) {
  EXPECT_EQ(kvcached_target("0.0.0.0:9400"), "127.0.0.1:9400");
  EXPECT_EQ(kvcached_target(":9400"), "127.0.0.1:9400");
  EXPECT_EQ(kvcached_target("[::]:9400"), "[::1]:9400");
  EXPECT_EQ(kvcached_target("10.0.0.5:9400"), "10.0.0.5:9400");
  EXPECT_EQ(kvcached_target("[fe80::1]:9400"), "[fe80::1]:9400");
  EXPECT_EQ(kvcached_target("kv.local:1"), "kv.local:1");
}

TEST_F(AgentOptions, an_external_engine_url_gives_the_engine_host_and_port) {
  auto s = parse(
      "[engine]\nkind = \"external\"\nattach_kind = \"vllm\"\nmodel = \"m\"\n"
      "url = \"http://127.0.0.2:8123/v1\"\n",
      {});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->launch.engine_host, "127.0.0.2");
  EXPECT_EQ(s->config.engine.port, 8123);
  EXPECT_EQ(s->launch.attach_kind, "vllm");
  for (const char* url : {"https://h:1", "http://h", "http://h:0", "http://h:123456"}) {
    auto bad = parse(std::string("[engine]\nkind = \"external\"\nattach_kind = \"vllm\"\nmodel = \"m\"\n"
                                 "url = \"") +
                         url + "\"\n",
                     {});
    ASSERT_FALSE(bad.ok()) << url;
    EXPECT_EQ(bad.error().code, 2);
    EXPECT_THAT(bad.error().message, HasSubstr(std::string("[engine] url \"") + url + "\""));
  }
}

}  // namespace
}  // namespace cgn::agent
