// The cgn-agent binary: --help, --print-command, --print-record with a fake nvidia-smi on PATH,
// and a full run over the fake engine stopped by SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/loopback_get.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;

std::string write_config(const TempDir& dir, const std::string& engine_toml) {
  const std::string path = dir.file("cognitora.toml");
  cgn::testing::write_file(
      path,
      "[agent]\nnode_id = \"agent-1\"\nlisten = \"127.0.0.1:9999\"\nwatt_limit = 500.0\n\n"
      "[engine]\n" +
          engine_toml);
  return path;
}

std::map<std::string, std::string> path_env(const TempDir& dir) {
  const char* p = std::getenv("PATH");
  return {{"PATH", dir.path() + ":" + (p ? p : "/usr/bin:/bin")}};
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
      p.log().find(
          "CUDA_VISIBLE_DEVICES=0,1 HIP_VISIBLE_DEVICES=0,1 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve "
          "Qwen/Qwen3-8B --port 8100 --served-model-name Qwen/Qwen3-8B --tensor-parallel-size 2 "
          "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"),
      std::string::npos)
      << p.log();
}

TEST(AgentMain, rejected_combination_exits_2_naming_it) {
  TempDir dir;
  auto cfg = write_config(dir, "kind = \"llamacpp\"\nmodel = \"/m.gguf\"\nport = 8100\n");
  Process p(
      {cgn::testing::bin_path("cgn-agent"), "--config", cfg, "--kv-offload", "lmcache", "--print-command"});
  EXPECT_EQ(p.wait(10s), 2);
  EXPECT_NE(p.log().find("llamacpp: kv_offload = \"lmcache\" is not supported"), std::string::npos)
      << p.log();
}

TEST(AgentMain, print_record_carries_the_gpu_identity_from_nvidia_smi) {
  TempDir dir;
  cgn::testing::write_file(
      dir.file("nvidia-smi"),
      "#!/bin/sh\nexec cat '" +
          cgn::testing::shared_path("reference/samples/nvidia-smi-query-gpu-h200-idle.csv") + "'\n");
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

}  // namespace
}  // namespace cgn::agent
