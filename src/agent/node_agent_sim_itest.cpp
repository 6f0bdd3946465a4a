// NodeAgent over the project's engine simulator: cgn-engine-sim symlinked as `vllm` and
// `llama-server`, so the drivers' real command lines start it and it imitates that engine's
// loading, health and /metrics.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "agent/node_agent.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::testing::TempDir;
using cgn::testing::wait_until;

NodeAgentOptions sim_options(const TempDir& dir, const std::string& engine_name,
                             std::vector<std::string> extra) {
  const std::string sim = cgn::testing::bin_path("cgn-engine-sim");
  EXPECT_EQ(::access(sim.c_str(), X_OK), 0) << sim;
  EXPECT_EQ(::symlink(sim.c_str(), dir.file(engine_name).c_str()), 0);
  NodeAgentOptions o;
  o.base.node_id = "sim-node";
  o.base.address = "127.0.0.1:9090";
  o.base.generation = 5000;
  o.engine.model = "sim/model";
  o.engine.port = static_cast<uint16_t>(cgn::testing::free_port());
  o.engine.extra_args = std::move(extra);
  o.supervisor.path_env = dir.path() + ":/usr/local/bin:/usr/bin:/bin";
  o.supervisor.probe_interval = 20ms;
  o.supervisor.ready_probe_interval = 20ms;
  o.supervisor.backoff_initial = 20ms;
  o.scrape_interval = 20ms;
  return o;
}

TEST(NodeAgentOverSim, vllm_line_runs_the_simulator_and_its_pool_reaches_the_record) {
  TempDir dir;
  auto o = sim_options(
      dir, "vllm", {"--num-gpu-blocks-override", "1234", "--block-size", "32", "--sim-load-seconds", "0.2"});
  auto agent = NodeAgent::create(**builtin_drivers().find("vllm"), o);
  ASSERT_TRUE(agent.ok()) << agent.error().message;
  (*agent)->start();
  ASSERT_TRUE(wait_until([&] { return (*agent)->record().total_blocks != 0; }, 20s));
  cluster::NodeRecord r = (*agent)->record();
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.total_blocks, 1234u);
  EXPECT_EQ(r.block_size, 32u);
  EXPECT_EQ(r.free_blocks, 1234u);
  EXPECT_EQ(r.kv_epoch, 5000u);
  EXPECT_EQ((*agent)->supervisor().state(), cluster::EngineState::kReady);

  // Kill the engine: the supervisor restarts it and the epoch moves on.
  ::kill(*(*agent)->supervisor().pid(), SIGKILL);
  ASSERT_TRUE(
      wait_until([&] { return (*agent)->supervisor().starts() == 2 && (*agent)->record().ready; }, 20s));
  EXPECT_EQ((*agent)->record().kv_epoch, 5001u);
  (*agent)->stop();
}

TEST(NodeAgentOverSim, llamacpp_line_runs_the_simulator_and_becomes_ready_after_loading) {
  TempDir dir;
  auto o = sim_options(dir, "llama-server", {"--sim-load-seconds", "0.3"});
  auto agent = NodeAgent::create(**builtin_drivers().find("llamacpp"), o);
  ASSERT_TRUE(agent.ok()) << agent.error().message;
  (*agent)->start();
  ASSERT_TRUE(wait_until([&] { return (*agent)->record().ready; }, 20s));
  EXPECT_EQ((*agent)->supervisor().state(), cluster::EngineState::kReady);
  EXPECT_EQ((*agent)->record().total_blocks, 0u);  // llama.cpp exports no pool size
  (*agent)->stop();
}

}  // namespace
}  // namespace cgn::agent
