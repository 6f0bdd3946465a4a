// The cgn-agent binary: --help, --print-command, --print-record with a fake nvidia-smi on PATH,
// a full run over the fake engine stopped by SIGTERM, an external engine on another loopback
// address, and publishing to a real etcd under a configured [state.etcd] prefix.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/agent_itest_util.h"
#include "state/etcd/itest_util.h"
#include "testing/engine_sim.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using namespace itest;  // Process, TempDir, wait_until and the agent's helpers

std::string write_config(const TempDir& dir, const std::string& engine_toml) {
  const std::string path = dir.file("cognitora.toml");
  cgn::testing::write_file(
      path,
      "[agent]\nnode_id = \"agent-1\"\nlisten = \"127.0.0.1:9999\"\nwatt_limit = 500.0\n\n"
      "[engine]\n" +
          engine_toml);
  return path;
}

TEST(AgentMain, help_lists_the_config_flag) {
  Process p({cgn::testing::bin_path("cgn-agent"), "--help"});
  EXPECT_EQ(p.wait(10s), 0);
  EXPECT_NE(p.log().find("--config"), std::string::npos);
}

TEST(AgentMain, print_command_shows_the_drivers_line_with_env) {
  TempDir dir;
  auto cfg = write_config(dir,
                          "kind = \"vllm\"\nmodel = \"Qwen/Qwen3-8B\"\nport = 8100\ngpus = [0, 1]\n"
                          "tensor_parallel = 2\n");
  Process p({cgn::testing::bin_path("cgn-agent"), "--config", cfg, "--role", "prefill",
             "--nixl-side-channel-port", "5559", "--print-command"});
  EXPECT_EQ(p.wait(10s), 0);
  EXPECT_NE(
      p.log().find("CUDA_VISIBLE_DEVICES=0,1 HIP_VISIBLE_DEVICES=0,1 VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 "
                   "VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve Qwen/Qwen3-8B --host 127.0.0.1 --port 8100 "
                   "--served-model-name Qwen/Qwen3-8B --tensor-parallel-size 2 "
                   "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"),
      std::string::npos)
      << p.log();
}

TEST(AgentMain, print_command_composes_nixl_with_the_offload_tier_on_a_prefill_node) {
  TempDir dir;
  auto cfg = write_config(dir, "kind = \"vllm\"\nmodel = \"m\"\nport = 8100\n");
  Process p({cgn::testing::bin_path("cgn-agent"), "--config", cfg, "--role", "prefill", "--kv-offload", "cgn",
             "--print-command"});
  EXPECT_EQ(p.wait(10s), 0);
  EXPECT_NE(p.log().find("--kv-transfer-config '{\"kv_connector\":\"MultiConnector\",\"kv_role\":\"kv_both\","
                         "\"kv_connector_extra_config\":{\"connectors\":[{\"kv_connector\":\"NixlConnector\","
                         "\"kv_role\":\"kv_both\"},{\"kv_connector\":\"CognitoraConnector\""),
            std::string::npos)
      << p.log();
  EXPECT_NE(p.log().find("\"kvcached_target\":\"127.0.0.1:9400\""), std::string::npos) << p.log();
}

TEST(AgentMain, rejected_combination_exits_2_naming_it) {
  TempDir dir;
  auto cfg = write_config(dir, "kind = \"llamacpp\"\nmodel = \"/m.gguf\"\nport = 8100\n");
  Process p(
      {cgn::testing::bin_path("cgn-agent"), "--config", cfg, "--kv-offload", "lmcache", "--print-command"});
  EXPECT_EQ(p.wait(10s), 2);
  EXPECT_NE(p.log().find("llamacpp: kv_offload = \"lmcache\" with role \"both\" is not supported: llama.cpp "
                         "has no KV connector interface"),
            std::string::npos)
      << p.log();
}

TEST(AgentMain, print_record_carries_the_gpu_identity_from_nvidia_smi) {
  TempDir dir;
  cgn::testing::write_file(
      dir.file("nvidia-smi"),
      "#!/bin/sh\nexec cat '" + cgn::testing::sample_path("nvidia-smi-query-gpu-h200-idle.csv") + "'\n");
  ::chmod(dir.file("nvidia-smi").c_str(), 0755);
  auto cfg = write_config(dir, "kind = \"vllm\"\nmodel = \"m\"\nserved_name = \"chat\"\nport = 8100\n");
  const std::string out = dir.file("out.txt");
  Process p({"/bin/sh", "-c", "\"$0\" --config \"$1\" --print-record > \"$2\"",
             cgn::testing::bin_path("cgn-agent"), cfg, out},
            path_env(dir));
  ASSERT_EQ(p.wait(10s), 0) << p.log();
  auto j = nlohmann::json::parse(cgn::testing::read_file(out));
  EXPECT_EQ(j["node_id"], "agent-1");
  EXPECT_EQ(j["address"], "127.0.0.1:9999");
  EXPECT_EQ(j["models"], nlohmann::json::array({"chat"}));
  EXPECT_EQ(j["gpu_name"], "NVIDIA H200");
  EXPECT_EQ(j["vram_total_mb"], 143771);
  EXPECT_EQ(j["watt_limit"], 500.0);
  EXPECT_EQ(j["total_blocks"], 0);
}

TEST(AgentMain, print_record_without_gpu_tools_has_no_gpu_fields) {
  TempDir dir;
  auto cfg = write_config(dir, "kind = \"vllm\"\nmodel = \"m\"\nport = 8100\n");
  const std::string out = dir.file("out.txt");
  // PATH holds only the shell's own tools directory, which has no nvidia-smi or rocm-smi.
  Process p({"/bin/sh", "-c", "\"$0\" --config \"$1\" --print-record > \"$2\"",
             cgn::testing::bin_path("cgn-agent"), cfg, out},
            {{"PATH", dir.path()}});
  ASSERT_EQ(p.wait(10s), 0) << p.log();
  auto j = nlohmann::json::parse(cgn::testing::read_file(out));
  EXPECT_FALSE(j.contains("gpu_name"));
  EXPECT_FALSE(j.contains("vram_total_mb"));
}

TEST(AgentMain, runs_the_engine_and_stops_it_on_sigterm) {
  TempDir dir;
  const std::string wrapper = dir.file("vllm");
  cgn::testing::write_file(wrapper, "#!/bin/sh\nFAKE_ENGINE_FLAVOUR=vllm exec python3 '" +
                                        cgn::testing::source_path("src/agent/testdata/fake_engine.py") +
                                        "' \"$@\"\n");
  ::chmod(wrapper.c_str(), 0755);
  const int port = cgn::testing::free_port();
  auto cfg = write_config(dir, "kind = \"vllm\"\nmodel = \"m\"\nport = " + std::to_string(port) + "\n");
  Process agent({cgn::testing::bin_path("cgn-agent"), "--config", cfg}, path_env(dir));
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = loopback_get("127.0.0.1", static_cast<uint16_t>(port), "/health", 500ms);
        return r.ok() && r->status == 200;
      },
      15s));
  ASSERT_TRUE(wait_until([&] { return agent.log().find("state=ready") != std::string::npos; }, 10s))
      << agent.log();
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(15s), 0);
  EXPECT_NE(agent.log().find("[engine] listening on"), std::string::npos);
  EXPECT_NE(agent.log().find("state=stopped"), std::string::npos);
  EXPECT_FALSE(loopback_get("127.0.0.1", static_cast<uint16_t>(port), "/health", 500ms).ok());
}

TEST(AgentMain, external_engine_on_another_host_is_the_data_paths_upstream) {
  // The engine listens on 127.0.0.2 only: nothing answers on 127.0.0.1 at its port.
  cgn::testing::EngineSim sim(sim_on("127.0.0.2"));
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  const auto port = static_cast<uint16_t>(cgn::testing::free_port());
  const std::string cfg = dir.file("agent.toml");
  cgn::testing::write_file(cfg, "[agent]\nnode_id = \"ext-1\"\nlisten = \"127.0.0.1:" + std::to_string(port) +
                                    "\"\ngrpc_listen = \"127.0.0.1:0\"\n[engine]\nkind = \"external\"\n"
                                    "attach_kind = \"vllm\"\nmodel = \"m\"\nurl = \"http://127.0.0.2:" +
                                    std::to_string(sim.port()) + "\"\n");
  Process agent({cgn::testing::bin_path("cgn-agent"), "--config", cfg});
  ASSERT_TRUE(wait_until([&] { return agent_healthy(port); }, 15s)) << agent.log();
  const auto [status, body] = chat_via(port, "hello");
  EXPECT_EQ(status, 200u) << body << "\n" << agent.log();
  EXPECT_NE(body.find("chat.completion"), std::string::npos) << body;
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(15s), 0);
}

TEST(AgentMain, publishes_under_the_configured_etcd_prefix) {
  auto& etcd = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(etcd.admin_endpoint());
  const std::string prefix = etcd::itest::fresh_prefix(*admin) + "lab";  // .../lab/nodes/<node>
  ASSERT_TRUE(admin->del_prefix("/cognitora/nodes/prefixed-1").ok());
  cgn::testing::EngineSim sim(sim_on("127.0.0.1"));
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  const auto port = static_cast<uint16_t>(cgn::testing::free_port());
  const std::string cfg = dir.file("agent.toml");
  cgn::testing::write_file(
      cfg, "[agent]\nnode_id = \"prefixed-1\"\nlisten = \"127.0.0.1:" + std::to_string(port) +
               "\"\ngrpc_listen = \"127.0.0.1:0\"\nstate_backend = \"etcd\"\npublish_interval_ms = 50\n"
               "[engine]\nkind = \"external\"\nattach_kind = \"vllm\"\nmodel = \"m\"\nurl = "
               "\"http://127.0.0.1:" +
               std::to_string(sim.port()) + "\"\n[state.etcd]\nendpoints = [\"http://" + etcd.endpoint() +
               "\"]\nprefix = \"" + prefix + "/\"\n");  // a trailing '/' is ignored
  Process agent({cgn::testing::bin_path("cgn-agent"), "--config", cfg});
  const std::string node_key = prefix + "/nodes/prefixed-1";
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = admin->get(node_key);
        return r.ok() && !r->kvs.empty();
      },
      15s))
      << agent.log();
  // A completed chat publishes its prefixes under the same root.
  ASSERT_TRUE(wait_until([&] { return agent_healthy(port); }, 15s)) << agent.log();
  std::string prompt;
  while (prompt.size() < 2000) {
    prompt += "a prompt long enough to fill several digest blocks. ";
  }
  const auto [status, body] = chat_via(port, prompt);
  ASSERT_EQ(status, 200u) << body;
  EXPECT_TRUE(wait_until(
      [&] {
        auto r = admin->get_prefix(prefix + "/kv/prefixed-1/");
        return r.ok() && !r->kvs.empty();
      },
      10s))
      << agent.log();
  // Nothing under the default root.
  auto def = admin->get("/cognitora/nodes/prefixed-1");
  ASSERT_TRUE(def.ok());
  EXPECT_TRUE(def->kvs.empty());
  auto def_kv = admin->get_prefix("/cognitora/kv/prefixed-1/");
  ASSERT_TRUE(def_kv.ok());
  EXPECT_TRUE(def_kv->kvs.empty());
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(15s), 0);
}

TEST(AgentMain, etcd_prefix_flag_must_be_a_path) {
  TempDir dir;
  auto cfg = write_config(dir, "kind = \"vllm\"\nmodel = \"m\"\nport = 8100\n");
  Process p({cgn::testing::bin_path("cgn-agent"), "--config", cfg, "--etcd-prefix", "lab", "--print-record"});
  EXPECT_EQ(p.wait(10s), 2);
  EXPECT_NE(p.log().find("--etcd-prefix"), std::string::npos) << p.log();
}

}  // namespace
}  // namespace cgn::agent
