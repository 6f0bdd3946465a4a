#include "sim/engine_flags.h"

#include <gtest/gtest.h>

#include "sim/launch.h"

namespace cgn::sim {
namespace {

TEST(EngineFlags, VllmAcceptsItsParsersFlagsInEveryFormArgparseTakes) {
  for (const char* f : {"--gpu-memory-utilization", "--max-model-len", "--tensor-parallel-size", "-tp",
                        "--reasoning-parser", "--enable-auto-tool-choice", "--no-enable-prefix-caching",
                        "--no-enable-chunked-prefill", "--max_model_len", "--gpu_memory_utilization",
                        "--compilation-config.cudagraph_mode", "--kv-transfer-config.kv_connector", "-O3",
                        "--gpu-memory-util", "--enable-log-requests", "--uvicorn-log-level", "-h"}) {
    EXPECT_EQ(engine_flag_error(Flavour::kVllm, f), std::nullopt) << f;
  }
}

TEST(EngineFlags, VllmRefusesAnUnknownFlagWithArgparsesError) {
  const auto e = engine_flag_error(Flavour::kVllm, "--max-model-lenn");
  ASSERT_TRUE(e);
  EXPECT_EQ(*e,
            "usage: vllm serve [model_tag] [options]\n"
            "vllm serve: error: unrecognized arguments: --max-model-lenn");
  for (const char* f : {"--gpu-memory-utilisation", "--no-max-model-len", "--max-model-len.x", "-x",
                        "--enable-prefix-cache"}) {
    EXPECT_TRUE(engine_flag_error(Flavour::kVllm, f)) << f;
  }
  // A prefix of one flag is that flag (--tensor-parallel: --tensor-parallel-size); of several, an error.
  EXPECT_EQ(engine_flag_error(Flavour::kVllm, "--tensor-parallel"), std::nullopt);
  const auto ambiguous = engine_flag_error(Flavour::kVllm, "--max-num");
  ASSERT_TRUE(ambiguous);
  EXPECT_NE(ambiguous->find("ambiguous option: --max-num could match --max-num-batched-tokens"),
            std::string::npos)
      << *ambiguous;
}

TEST(EngineFlags, SglangAcceptsTheAgentsAndRecipesFlags) {
  for (const char* f :
       {"--model-path", "--tp", "--tp-size", "--enable-metrics", "--context-length", "--mem-fraction-static",
        "--reasoning-parser", "--page-size", "--disaggregation-mode", "--disaggregation-transfer-backend",
        "--enable-hierarchical-cache", "--enable-lmcache", "--served-model-name", "--kv-events-config"}) {
    EXPECT_EQ(engine_flag_error(Flavour::kSglang, f), std::nullopt) << f;
  }
  // The DeepSeek-V4-Flash recipe's (NVIDIA Dynamo's SGLang recipe abbreviates --speculative-algorithm).
  for (const char* f : {"--moe-runner-backend", "--disable-flashinfer-autotune", "--speculative-algo",
                        "--speculative-num-steps", "--speculative-eagle-topk",
                        "--speculative-num-draft-tokens", "--chunked-prefill-size", "--trust-remote-code"}) {
    EXPECT_EQ(engine_flag_error(Flavour::kSglang, f), std::nullopt) << f;
  }
  // No underscore spelling and no --no- forms: plain argparse.
  for (const char* f : {"--mem_fraction_static", "--no-enable-metrics", "--mem-fraction-statik"}) {
    const auto e = engine_flag_error(Flavour::kSglang, f);
    ASSERT_TRUE(e) << f;
    EXPECT_NE(e->find(std::string("launch_server.py: error: unrecognized arguments: ") + f),
              std::string::npos)
        << *e;
  }
}

TEST(EngineFlags, FlavoursWithoutATableAcceptEveryFlag) {
  EXPECT_EQ(engine_flag_error(Flavour::kLlamacpp, "--anything"), std::nullopt);
  EXPECT_EQ(engine_flag_error(Flavour::kTrtllm, "--anything"), std::nullopt);
  EXPECT_EQ(engine_flags_source(Flavour::kLlamacpp), "");
  EXPECT_NE(engine_flags_source(Flavour::kVllm).find("arg_utils.py"), std::string_view::npos);
}

TEST(EngineFlags, TheLaunchLineRefusesAMisspeltFlagNamingIt) {
  const std::vector<std::string> line = {"vllm", "serve", "M", "--port", "8000", "--gpu-memory-utilisation",
                                         "0.9"};
  const auto r = parse_launch_line(line);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, LaunchError::kUnknownFlag);
  EXPECT_NE(r.error().message.find("unrecognized arguments: --gpu-memory-utilisation"), std::string::npos);

  const std::vector<std::string> sglang = {"python3",      "-m", "sglang.launch_server",
                                           "--model-path", "M",  "--enable-metrix"};
  const auto s = parse_launch_line(sglang);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, LaunchError::kUnknownFlag);

  const std::vector<std::string> good = {"vllm", "serve", "M", "--gpu_memory_utilization=0.9",
                                         "--enforce-eager"};
  const auto g = parse_launch_line(good);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->ignored_flags, (std::vector<std::string>{"--gpu_memory_utilization", "--enforce-eager"}));
}

}  // namespace
}  // namespace cgn::sim
