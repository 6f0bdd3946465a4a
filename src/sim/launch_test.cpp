#include "sim/launch.h"

#include <gtest/gtest.h>

namespace cgn::sim {
namespace {

Result<SimOptions, LaunchError> parse(std::vector<std::string> argv) {
  return parse_launch_line(argv);
}

TEST(LaunchLine, EachEnginesCommandLineIsUnderstood) {
  struct Case {
    std::vector<std::string> argv;
    Flavour flavour;
    std::string model;
    std::string served;
    uint16_t port;
    bool metrics;
  };
  const std::vector<Case> cases = {
      {{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8100", "--served-model-name",
        "llama"},
       Flavour::kVllm,
       "meta-llama/Llama-3.1-8B-Instruct",
       "llama",
       8100,
       true},
      {{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--port=8001"},
       Flavour::kVllm,
       "m",
       "m",
       8001,
       true},
      {{"/usr/bin/llama-server", "-m", "/models/x.gguf", "--port", "9000", "-np", "4", "--metrics"},
       Flavour::kLlamacpp,
       "/models/x.gguf",
       "/models/x.gguf",
       9000,
       true},
      {{"llama-server", "-m", "x.gguf"}, Flavour::kLlamacpp, "x.gguf", "x.gguf", 8080, false},
      {{"python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--port", "30001",
        "--enable-metrics"},
       Flavour::kSglang,
       "Qwen/Qwen3-8B",
       "Qwen/Qwen3-8B",
       30001,
       true},
      {{"trtllm-serve", "nvidia/model", "--port", "8005", "--backend", "pytorch"},
       Flavour::kTrtllm,
       "nvidia/model",
       "nvidia/model",
       8005,
       true},
      {{"mlx_lm.server", "--model", "mlx-community/m", "--port", "8090"},
       Flavour::kMlx,
       "mlx-community/m",
       "mlx-community/m",
       8090,
       false},
  };
  for (const auto& c : cases) {
    auto o = parse(c.argv);
    ASSERT_TRUE(o.ok()) << c.argv[0] << ": " << o.error().message;
    EXPECT_EQ(o->flavour, c.flavour) << c.argv[0];
    EXPECT_EQ(o->model, c.model);
    EXPECT_EQ(o->served_model_name, c.served);
    EXPECT_EQ(o->port, c.port);
    EXPECT_EQ(o->metrics_enabled, c.metrics) << c.argv[0];
  }
}

TEST(LaunchLine, NixlPrefillNodeFromTheVllmIntegrationScript) {
  auto o = parse({"VLLM_NIXL_SIDE_CHANNEL_PORT=5559", "VLLM_NIXL_ABORT_REQUEST_TIMEOUT=30", "vllm", "serve",
                  "M", "--port", "8100", "--kv-transfer-config",
                  R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_TRUE(o->kv_transfer.has_value());
  EXPECT_EQ(o->kv_transfer->kv_connector, "NixlConnector");
  EXPECT_EQ(o->kv_transfer->kv_role, "kv_both");
  EXPECT_EQ(o->engine.side_channel_port, 5559);
  EXPECT_EQ(o->engine.kv_abort_timeout, 30 * kNanosPerSecond);
  EXPECT_FALSE(o->engine.engine_id.empty());
  auto named =
      parse({"vllm", "serve", "M", "--kv-transfer-config", R"({"kv_role":"kv_producer","engine_id":"p0"})"});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->engine.engine_id, "p0");
}

TEST(LaunchLine, ShapeFlagsReachTheNodeModel) {
  auto o =
      parse({"vllm", "serve", "M", "--block-size", "32", "--num-gpu-blocks-override", "1000",
             "--max-num-seqs", "64", "--max-num-batched-tokens", "2048", "--max-model-len", "4096", "-tp",
             "2", "--no-enable-prefix-caching", "--gpu-memory-utilization", "0.8", "--enforce-eager"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->engine.model.block_size, 32u);
  EXPECT_EQ(o->engine.model.num_gpu_blocks, 1000u);
  EXPECT_EQ(o->engine.model.max_num_seqs, 64u);
  EXPECT_EQ(o->engine.model.max_num_batched_tokens, 2048u);
  EXPECT_EQ(o->engine.model.max_model_len, 4096u);
  EXPECT_EQ(o->engine.tp_size, 2);
  EXPECT_FALSE(o->engine.enable_prefix_caching);
  EXPECT_EQ(o->ignored_flags, (std::vector<std::string>{"--gpu-memory-utilization", "--enforce-eager"}));
  auto l = parse({"llama-server", "-m", "x", "-np", "3", "-c", "8192"});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->engine.model.max_num_seqs, 3u);
  EXPECT_EQ(l->engine.model.max_model_len, 8192u);
}

TEST(LaunchLine, SimulatorFlags) {
  auto o = parse({"vllm", "serve", "M", "--sim-time-scale", "0.1", "--sim-mode", "echo",
                  "--sim-deprecated-metrics", "--sim-load-seconds", "2.5", "--sim-fault",
                  "error=503,rate=0.5", "--sim-max-waiting", "10"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_DOUBLE_EQ(o->engine.time_scale, 0.1);
  EXPECT_EQ(o->reply_mode, ReplyMode::kEcho);
  EXPECT_TRUE(o->deprecated_metrics);
  EXPECT_DOUBLE_EQ(o->load_seconds, 2.5);
  EXPECT_EQ(o->faults.error_status, 503);
  EXPECT_DOUBLE_EQ(o->faults.rate, 0.5);
  EXPECT_EQ(o->engine.max_waiting, 10u);
}

TEST(LaunchLine, BadLinesGiveClearErrors) {
  struct Case {
    std::vector<std::string> argv;
    LaunchError want;
    const char* mention;
  };
  const std::vector<Case> cases = {
      {{}, LaunchError::kUnknownProgram, "no program"},
      {{"ollama", "run", "x"}, LaunchError::kUnknownProgram, "ollama"},
      {{"vllm", "bench"}, LaunchError::kUnknownProgram, "vllm serve"},
      {{"vllm", "serve"}, LaunchError::kMissingModel, "no model"},
      {{"vllm", "serve", "M", "--port", "70000"}, LaunchError::kBadValue, "--port"},
      {{"vllm", "serve", "M", "--port"}, LaunchError::kMissingValue, "--port"},
      {{"vllm", "serve", "M", "--kv-transfer-config", "{not json"}, LaunchError::kBadValue, "JSON"},
      {{"vllm", "serve", "M", "--kv-transfer-config", R"({"kv_role":"boss"})"},
       LaunchError::kBadValue,
       "kv_role"},
      {{"vllm", "serve", "M", "--sim-time-scale", "-1"}, LaunchError::kBadValue, "--sim-time-scale"},
      {{"vllm", "serve", "M", "--sim-fault", "error=404"}, LaunchError::kBadValue, "--sim-fault"},
      {{"python", "-m", "other.module"}, LaunchError::kUnknownProgram, "other.module"},
      {{"VLLM_NIXL_SIDE_CHANNEL_PORT=x", "vllm", "serve", "M"}, LaunchError::kBadValue, "SIDE_CHANNEL_PORT"},
  };
  for (const auto& c : cases) {
    auto o = parse(c.argv);
    ASSERT_FALSE(o.ok()) << c.mention;
    EXPECT_EQ(o.error().code, c.want) << c.mention;
    EXPECT_NE(o.error().message.find(c.mention), std::string::npos) << o.error().message;
  }
}

TEST(LaunchLine, ExplicitPortZeroAsksForAFreePortWhileAnAbsentPortMeansTheDefault) {
  auto zero = parse({"vllm", "serve", "M", "--port", "0"});
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  EXPECT_EQ(zero->port, 0);
  auto env_zero = parse({"LLAMA_ARG_PORT=0", "llama-server", "-m", "x.gguf"});
  ASSERT_TRUE(env_zero.ok()) << env_zero.error().message;
  EXPECT_EQ(env_zero->port, 0);
  auto absent = parse({"vllm", "serve", "M"});
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->port, 8000);
}

}  // namespace
}  // namespace cgn::sim
