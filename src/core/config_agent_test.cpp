// [agent] and [engine] keys: the gRPC listen address, agent timings, engine role,
// kv_offload modes, external attach, disaggregation transfer and per-engine knobs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config.h"
#include "testing/config_env.h"

namespace cgn::config {
namespace {

using ::testing::HasSubstr;

Result<CognitoraConfig, ConfigError> load(std::string_view text) {
  return cgn::testing::load_toml(text);
}
std::string error_of(std::string_view text) {
  return cgn::testing::load_error(text);
}

TEST(ConfigAgent, ReadsTheAgentAndEngineKeys) {
  auto r = load(R"(
[agent]
grpc_listen = "127.0.0.1:0"
scrape_interval_ms = 250
probe_interval_ms = 100
restart_backoff_initial_ms = 200
restart_backoff_max_ms = 5000
stop_grace_ms = 3000
engine_outlives_agent = true
[engine]
kind = "vllm"
model = "m"
role = "prefill"
kv_offload = "nixl"
pd_transfer_backend = "nixl"
nixl_side_channel_host = "10.0.0.7"
nixl_side_channel_port = 5600
parallel_slots = 8
page_size = 64
kv_events = true
kv_events_port = 6557
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& a = r->agent;
  EXPECT_EQ(a.grpc_listen, "127.0.0.1:0");
  EXPECT_EQ(a.scrape_interval_ms, 250u);
  EXPECT_EQ(a.probe_interval_ms, 100u);
  EXPECT_EQ(a.restart_backoff_initial_ms, 200u);
  EXPECT_EQ(a.restart_backoff_max_ms, 5000u);
  EXPECT_EQ(a.stop_grace_ms, 3000u);
  EXPECT_TRUE(a.engine_outlives_agent);
  const auto& e = r->engine;
  EXPECT_EQ(e.role, "prefill");
  EXPECT_EQ(e.kv_offload, "nixl");
  EXPECT_EQ(e.nixl_side_channel_host, "10.0.0.7");
  EXPECT_EQ(e.nixl_side_channel_port, 5600);
  EXPECT_EQ(e.parallel_slots, 8u);
  EXPECT_EQ(e.page_size, 64u);
  EXPECT_TRUE(e.kv_events);
  EXPECT_EQ(e.kv_events_port, 6557);
  // The dump loads back to the same values.
  auto again = load(dump_config(*r));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(dump_config(*again), dump_config(*r));
}

TEST(ConfigAgent, ExternalEngineTakesAUrlAndAnAttachKind) {
  auto r = load(R"(
[engine]
kind = "external"
url = "http://127.0.0.1:8123"
attach_kind = "llamacpp"
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->engine.kind, "external");
  EXPECT_EQ(r->engine.url, "http://127.0.0.1:8123");
  EXPECT_EQ(r->engine.attach_kind, "llamacpp");
}

TEST(ConfigAgent, KvEventsAreOffByDefaultAndThePortIsBounded) {
  auto d = load("[engine]\nkind = \"vllm\"\n");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->engine.kv_events);
  EXPECT_EQ(d->engine.kv_events_port, 5557);
  EXPECT_FALSE(load("[engine]\nkv_events_port = 0\n").ok());
  EXPECT_FALSE(load("[engine]\nkv_events = \"yes\"\n").ok());
}

TEST(ConfigAgent, KvOffloadAcceptsTheOlderBoolean) {
  EXPECT_EQ(load("[engine]\nkv_offload = false\n")->engine.kv_offload, "none");
  EXPECT_EQ(load("[engine]\nkv_offload = true\n")->engine.kv_offload, "cgn");
  EXPECT_EQ(load("[engine]\nkv_offload = \"hicache\"\n")->engine.kv_offload, "hicache");
}

TEST(ConfigAgent, BadValuesAreClearErrors) {
  EXPECT_THAT(error_of("[engine]\nkv_offload = \"disk\"\n"), HasSubstr("engine.kv_offload"));
  EXPECT_THAT(error_of("[engine]\nrole = \"leader\"\n"), HasSubstr("engine.role"));
  EXPECT_THAT(error_of("[engine]\nkind = \"vllm\"\nurl = \"http://127.0.0.1:1\"\n"),
              HasSubstr("is only for kind = \"external\""));
  EXPECT_THAT(error_of("[engine]\nkind = \"external\"\nattach_kind = \"external\"\n"),
              HasSubstr("engine.attach_kind"));
  EXPECT_THAT(error_of("[engine]\npd_transfer_backend = \"tcp\"\n"), HasSubstr("engine.pd_transfer_backend"));
  EXPECT_THAT(error_of("[engine]\nparallel_slots = 0\n"), HasSubstr("engine.parallel_slots"));
  EXPECT_THAT(error_of("[engine]\nnixl_side_channel_port = 70000\n"),
              HasSubstr("engine.nixl_side_channel_port"));
  EXPECT_THAT(error_of("[agent]\ngrpc_listen = \"9091\"\n"), HasSubstr("agent.grpc_listen"));
  EXPECT_THAT(error_of("[agent]\nrestart_backoff_initial_ms = 9000\nrestart_backoff_max_ms = 1000\n"),
              HasSubstr("above restart_backoff_max_ms"));
  EXPECT_THAT(error_of("[agent]\nscrape_interval_ms = 1\n"), HasSubstr("agent.scrape_interval_ms"));
}

}  // namespace
}  // namespace cgn::config

namespace cgn::config {
namespace {

TEST(ConfigAgent, StaticNodesCanNameTheirAgent) {
  auto r = load(R"(
[[router.nodes]]
url = "http://10.0.0.7:9090"
agent = "10.0.0.7:9091"
[[router.nodes]]
url = "http://10.0.0.8:8000"
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->router.nodes.size(), 2u);
  EXPECT_EQ(r->router.nodes[0].agent, "10.0.0.7:9091");
  EXPECT_EQ(r->router.nodes[1].agent, "");
  auto again = load(dump_config(*r));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->router.nodes[0].agent, "10.0.0.7:9091");
  EXPECT_EQ(again->router.nodes[1].agent, "");
  EXPECT_THAT(error_of("[[router.nodes]]\nurl = \"http://a:1\"\nagent = \"a\"\n"),
              HasSubstr("router.nodes[0].agent"));
}

}  // namespace
}  // namespace cgn::config
