// NodeAgent end to end: a fake vLLM (testdata/fake_engine.py) serving the real vLLM /metrics
// capture, supervised and scraped into the node record.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agent/loopback_get.h"
#include "agent/node_agent.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::testing::TempDir;
using cgn::testing::wait_until;

TEST(NodeAgent, scrapes_the_engine_into_the_record_and_bumps_kv_epoch_on_restart) {
  TempDir dir;
  const std::string wrapper = dir.file("vllm");
  cgn::testing::write_file(wrapper,
                           "#!/bin/sh\nFAKE_ENGINE_FLAVOUR=vllm FAKE_ENGINE_METRICS='" +
                               cgn::testing::sample_path("vllm-v1-metrics.txt") + "' exec python3 '" +
                               cgn::testing::source_path("src/agent/testdata/fake_engine.py") + "' \"$@\"\n");
  ::chmod(wrapper.c_str(), 0755);
  const uint16_t port = static_cast<uint16_t>(cgn::testing::free_port());

  NodeAgentOptions o;
  o.base.node_id = "node-a";
  o.base.address = "127.0.0.1:9090";
  o.base.engine = "vllm";
  o.base.models = {"Qwen/Qwen1.5-0.5B-Chat"};
  o.base.generation = 1000;
  o.engine.model = "Qwen/Qwen1.5-0.5B-Chat";
  o.engine.port = port;
  o.supervisor.path_env = dir.path() + ":/usr/local/bin:/usr/bin:/bin";
  o.supervisor.probe_interval = 20ms;
  o.supervisor.ready_probe_interval = 20ms;
  o.supervisor.backoff_initial = 20ms;
  o.scrape_interval = 20ms;
  auto agent = NodeAgent::create(**builtin_drivers().find("vllm"), o);
  ASSERT_TRUE(agent.ok()) << agent.error().message;
  (*agent)->start();

  ASSERT_TRUE(wait_until([&] { return (*agent)->record().total_blocks != 0; }, 15s));
  cluster::NodeRecord r = (*agent)->record();
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.total_blocks, 2452u);
  EXPECT_EQ(r.free_blocks, 2452u);
  EXPECT_EQ(r.queue_depth, 0.0);
  EXPECT_EQ(r.kv_epoch, 1000u);
  EXPECT_EQ(r.node_id, "node-a");

  ASSERT_TRUE(loopback_get("127.0.0.1", port, "/exit?code=1", 2s).ok());
  ASSERT_TRUE(
      wait_until([&] { return (*agent)->supervisor().starts() == 2 && (*agent)->record().ready; }, 15s));
  EXPECT_EQ((*agent)->record().kv_epoch, 1001u);
  (*agent)->stop();
  EXPECT_FALSE((*agent)->record().ready);
}

}  // namespace
}  // namespace cgn::agent
