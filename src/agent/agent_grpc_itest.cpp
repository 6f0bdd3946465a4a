// The gRPC service Agent over real loopback gRPC: the server alone, then the cgn-agent binary
// running cgn-engine-sim (symlinked as `vllm`) polled through Health while the engine loads and
// becomes ready.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>

#include "agent/agent_grpc.h"
#include "agent/agent_itest_util.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using namespace itest;  // Process, TempDir, wait_until and the agent's helpers

TEST(AgentGrpcServer, serves_the_current_health_on_an_os_chosen_port) {
  std::atomic<int> calls{0};
  cluster::NodeRecord r;
  r.node_id = "n1";
  r.address = "127.0.0.1:9090";
  r.engine = "vllm";
  r.models = {"m"};
  r.kv_epoch = 7;
  r.generation = 7;
  auto server = AgentGrpcServer::start("127.0.0.1:0", [&] {
    ++calls;
    cluster::NodeRecord copy = r;
    copy.ready = calls.load() > 1;
    return cluster::AgentHealth{
        copy, calls.load() > 1 ? cluster::EngineState::kReady : cluster::EngineState::kStarting, 1};
  });
  ASSERT_TRUE(server.ok()) << server.error().message;
  ASSERT_NE((*server)->port(), 0);
  const std::string target = "127.0.0.1:" + std::to_string((*server)->port());
  auto first = call_agent_health(target, 5s);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->engine_state, cluster::EngineState::kStarting);
  EXPECT_FALSE(first->record.ready);
  EXPECT_EQ(first->record.node_id, "n1");
  auto second = call_agent_health(target, 5s);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->engine_state, cluster::EngineState::kReady);
  EXPECT_TRUE(second->record.ready);
  EXPECT_EQ(second->engine_starts, 1u);
  (*server)->stop();
  auto after = call_agent_health(target, 1s);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code, GrpcError::kCall);
}

TEST(AgentGrpcServer, an_unusable_address_is_a_listen_error) {
  auto server = AgentGrpcServer::start("256.1.1.1:0", [] { return cluster::AgentHealth{}; });
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().code, GrpcError::kListen);
  EXPECT_NE(server.error().message.find("256.1.1.1:0"), std::string::npos);
}

TEST(AgentGrpcBinary, health_reports_the_record_and_loading_then_ready_over_the_simulator) {
  TempDir dir;
  const std::string sim = cgn::testing::bin_path("cgn-engine-sim");
  ASSERT_EQ(::access(sim.c_str(), X_OK), 0) << sim;
  ASSERT_EQ(::symlink(sim.c_str(), dir.file("vllm").c_str()), 0);
  const int engine_port = cgn::testing::free_port();
  const std::string cfg = dir.file("cognitora.toml");
  cgn::testing::write_file(cfg,
                           "[agent]\nnode_id = \"grpc-node\"\nlisten = \"127.0.0.1:0\"\n"
                           "grpc_listen = \"127.0.0.1:0\"\nwatt_limit = 300.0\n"
                           "scrape_interval_ms = 50\nprobe_interval_ms = 20\n"
                           "restart_backoff_initial_ms = 20\n\n"
                           "[engine]\nkind = \"vllm\"\nmodel = \"sim/model\"\nrole = \"decode\"\n"
                           "port = " +
                               std::to_string(engine_port) +
                               "\nextra_args = [\"--num-gpu-blocks-override\", \"1234\", "
                               "\"--block-size\", \"32\", \"--sim-load-seconds\", \"1.5\"]\n");
  Process agent(
      {cgn::testing::bin_path("cgn-agent"), "--config", cfg, "--grpc-port-file", dir.file("grpc.port")},
      path_env(dir));
  const int port = cgn::testing::wait_for_port_file(dir.file("grpc.port"), agent, 20s);
  ASSERT_GT(port, 0) << agent.describe() << "\n" << agent.log();
  const std::string target = "127.0.0.1:" + std::to_string(port);

  // The engine takes 1.5 s to load: Health says starting (not ready) first, then ready with the
  // simulator's pool in the record.
  std::vector<cluster::EngineState> seen;
  cluster::AgentHealth last;
  ASSERT_TRUE(wait_until(
      [&] {
        auto h = call_agent_health(target, 2s);
        if (!h.ok()) {
          return false;
        }
        if (seen.empty() || seen.back() != h->engine_state) {
          seen.push_back(h->engine_state);
        }
        last = *h;
        return h->engine_state == cluster::EngineState::kReady && h->record.total_blocks != 0;
      },
      30s, 20ms))
      << agent.log();
  // The gRPC server is up before the engine starts: stopped, then starting (loading), then ready.
  std::vector<cluster::EngineState> expected = {
      cluster::EngineState::kStopped, cluster::EngineState::kStarting, cluster::EngineState::kReady};
  if (seen.front() != cluster::EngineState::kStopped) {
    expected.erase(expected.begin());
  }
  EXPECT_EQ(seen, expected) << agent.log();
  const cluster::NodeRecord& r = last.record;
  EXPECT_EQ(r.node_id, "grpc-node");
  EXPECT_EQ(r.engine, "vllm");
  EXPECT_EQ(r.role, routing::NodeRole::kDecode);
  EXPECT_EQ(r.models, std::vector<std::string>{"sim/model"});
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.total_blocks, 1234u);
  EXPECT_EQ(r.block_size, 32u);
  EXPECT_EQ(r.free_blocks, 1234u);
  EXPECT_DOUBLE_EQ(r.watt_limit, 300.0);
  EXPECT_NE(r.generation, 0u);
  EXPECT_EQ(r.kv_epoch, r.generation);  // no restart yet
  EXPECT_FALSE(r.version.empty());
  EXPECT_EQ(last.engine_starts, 1u);
  // The decode role reached the engine's line: vLLM's NixlConnector with kv_both.
  EXPECT_NE(agent.log().find(R"(NixlConnector\",\"kv_role\":\"kv_both)"), std::string::npos) << agent.log();

  EXPECT_EQ(agent.stop(20s), 0) << agent.log();
}

}  // namespace
}  // namespace cgn::agent
