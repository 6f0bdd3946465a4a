#include "agent/driver.h"

#include <gtest/gtest.h>

namespace cgn::agent {
namespace {

using routing::NodeRole;
using Argv = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

config::EngineConfig engine_config(std::string model, uint16_t port) {
  config::EngineConfig e;
  e.model = std::move(model);
  e.port = port;
  return e;
}

// vLLM's line for model "m" on HOST:PORT with TP 1, then `tail`.
Argv vllm_m(const std::string& host, const std::string& port, const Argv& tail) {
  Argv a = {"vllm", "serve",
            "m",    "--host",
            host,   "--port",
            port,   "--served-model-name",
            "m",    "--tensor-parallel-size",
            "1"};
  a.insert(a.end(), tail.begin(), tail.end());
  return a;
}

// SGLang's line for model "m" on 127.0.0.1:PORT with TP 1, then `tail`.
Argv sglang_m(const std::string& port, const Argv& tail) {
  Argv a = {"python3", "-m", "sglang.launch_server", "--model-path", "m", "--host", "127.0.0.1",
            "--port",  port, "--enable-metrics",     "--tp",         "1"};
  a.insert(a.end(), tail.begin(), tail.end());
  return a;
}

constexpr const char* kNixlBoth = R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})";

struct LaunchCase {
  std::string label;
  std::string driver;
  config::EngineConfig engine;
  LaunchOptions options;
  Argv argv;
  Env env;
};

std::vector<LaunchCase> launch_cases() {
  std::vector<LaunchCase> cases;
  {
    LaunchCase c{"vllm_plain", "vllm", engine_config("Qwen/Qwen3-8B", 8000), {}, {}, {}};
    c.argv = {"vllm",   "serve", "Qwen/Qwen3-8B",       "--host",        "127.0.0.1",
              "--port", "8000",  "--served-model-name", "Qwen/Qwen3-8B", "--tensor-parallel-size",
              "1"};
    cases.push_back(c);
  }
  {
    LaunchCase c{"vllm_tp_served_gpus_extra", "vllm", engine_config("/models/llama", 8100), {}, {}, {}};
    c.engine.served_name = "llama";
    c.engine.tensor_parallel = 2;
    c.engine.gpus = {2, 3};
    c.engine.extra_args = {"--max-model-len", "8192"};
    c.argv = {"vllm",
              "serve",
              "/models/llama",
              "--host",
              "127.0.0.1",
              "--port",
              "8100",
              "--served-model-name",
              "llama",
              "--tensor-parallel-size",
              "2",
              "--max-model-len",
              "8192"};
    c.env = {{"CUDA_VISIBLE_DEVICES", "2,3"}, {"HIP_VISIBLE_DEVICES", "2,3"}};
    cases.push_back(c);
  }
  {
    LaunchCase c{"vllm_prefill_nixl", "vllm", engine_config("m", 8100), {}, {}, {}};
    c.options.role = NodeRole::kPrefill;
    c.options.nixl_side_channel_port = 5559;
    c.options.nixl_side_channel_host = "10.0.0.5";
    c.engine.gpus = {0};
    c.argv = vllm_m("127.0.0.1", "8100", {"--kv-transfer-config", kNixlBoth});
    c.env = {{"CUDA_VISIBLE_DEVICES", "0"},
             {"HIP_VISIBLE_DEVICES", "0"},
             {"VLLM_NIXL_SIDE_CHANNEL_HOST", "10.0.0.5"},
             {"VLLM_NIXL_SIDE_CHANNEL_PORT", "5559"}};
    cases.push_back(c);
  }
  {
    LaunchCase c{"vllm_decode_nixl", "vllm", engine_config("m", 8200), {}, {}, {}};
    c.options.role = NodeRole::kDecode;
    c.options.nixl_side_channel_port = 5659;
    c.argv = vllm_m("127.0.0.1", "8200", {"--kv-transfer-config", kNixlBoth});
    c.env = {{"VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"}, {"VLLM_NIXL_SIDE_CHANNEL_PORT", "5659"}};
    cases.push_back(c);
  }
  {
    LaunchCase c{"vllm_both_nixl", "vllm", engine_config("m", 8000), {}, {}, {}};
    c.options.kv_offload = KvOffload::kNixl;
    c.argv = vllm_m("127.0.0.1", "8000", {"--kv-transfer-config", kNixlBoth});
    c.env = {{"VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"}};
    cases.push_back(c);
  }
  {
    // [engine] host moves every listening socket of the engine; the NIXL side channel stays
    // where it is configured.
    LaunchCase c{"vllm_host_configured", "vllm", engine_config("m", 8000), {}, {}, {}};
    c.engine.host = "10.1.2.3";
    c.options.role = NodeRole::kPrefill;
    c.argv = vllm_m("10.1.2.3", "8000", {"--kv-transfer-config", kNixlBoth});
    c.env = {{"VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"}};
    cases.push_back(c);
  }
  {
    LaunchCase c{"vllm_lmcache", "vllm", engine_config("m", 8000), {}, {}, {}};
    c.options.kv_offload = KvOffload::kLmcache;
    c.argv = vllm_m("127.0.0.1", "8000",
                    {"--kv-transfer-config", R"({"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"})"});
    cases.push_back(c);
  }
  {
    LaunchCase c{"sglang_plain", "sglang", engine_config("Qwen/Qwen3-8B", 30000), {}, {}, {}};
    c.engine.tensor_parallel = 4;
    c.engine.gpus = {0, 1, 2, 3};
    c.argv = {"python3",
              "-m",
              "sglang.launch_server",
              "--model-path",
              "Qwen/Qwen3-8B",
              "--host",
              "127.0.0.1",
              "--port",
              "30000",
              "--enable-metrics",
              "--tp",
              "4"};
    c.env = {{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"HIP_VISIBLE_DEVICES", "0,1,2,3"}};
    cases.push_back(c);
  }
  {
    LaunchCase c{"sglang_served_hicache", "sglang", engine_config("m", 30000), {}, {}, {}};
    c.engine.served_name = "chat";
    c.engine.extra_args = {"--page-size", "64"};
    c.options.kv_offload = KvOffload::kHicache;
    c.argv = sglang_m("30000",
                      {"--served-model-name", "chat", "--enable-hierarchical-cache", "--page-size", "64"});
    cases.push_back(c);
  }
  {
    LaunchCase c{"llamacpp_alias", "llamacpp", engine_config("/m/q.gguf", 8080), {}, {}, {}};
    c.engine.served_name = "qwen";
    c.options.parallel_slots = 8;
    c.engine.gpus = {1};
    c.argv = {"llama-server", "-m",         "/m/q.gguf", "--host",    "127.0.0.1", "--port",
              "8080",         "--parallel", "8",         "--metrics", "--alias",   "qwen"};
    c.env = {{"CUDA_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", "1"}};
    cases.push_back(c);
  }
  {
    LaunchCase c{"llamacpp_plain", "llamacpp", engine_config("/m/q.gguf", 8080), {}, {}, {}};
    c.argv = {"llama-server", "-m",   "/m/q.gguf",  "--host", "127.0.0.1",
              "--port",       "8080", "--parallel", "4",      "--metrics"};
    cases.push_back(c);
  }
  {
    LaunchCase c{"sglang_prefill_mooncake_page", "sglang", engine_config("m", 30000), {}, {}, {}};
    c.options.role = NodeRole::kPrefill;
    c.options.pd_transfer_backend = "mooncake";
    c.options.page_size = 64;
    c.argv = sglang_m("30000", {"--page-size", "64", "--disaggregation-mode", "prefill",
                                "--disaggregation-transfer-backend", "mooncake"});
    cases.push_back(c);
  }
  {
    LaunchCase c{"sglang_decode_nixl", "sglang", engine_config("m", 30001), {}, {}, {}};
    c.options.role = NodeRole::kDecode;
    c.argv =
        sglang_m("30001", {"--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl"});
    cases.push_back(c);
  }
  {
    LaunchCase c{"trtllm", "trtllm", engine_config("meta/llama", 8000), {}, {}, {}};
    c.engine.tensor_parallel = 8;
    c.engine.extra_args = {"--backend", "pytorch"};
    c.argv = {"trtllm-serve", "meta/llama", "--host", "127.0.0.1", "--port",
              "8000",         "--tp_size",  "8",      "--backend", "pytorch"};
    cases.push_back(c);
  }
  {
    LaunchCase c{"mlx", "mlx", engine_config("mlx-community/Qwen3", 8080), {}, {}, {}};
    c.argv = {"mlx_lm.server", "--model", "mlx-community/Qwen3", "--host", "127.0.0.1", "--port", "8080"};
    cases.push_back(c);
  }
  {
    LaunchCase c{"cgn_infer", "cgn-infer", engine_config("m", 9000), {}, {}, {}};
    c.engine.served_name = "x";
    c.engine.tensor_parallel = 2;
    c.engine.gpus = {0, 1};
    c.argv = {"cgn-infer",           "--model", "m",    "--host", "127.0.0.1", "--port", "9000",
              "--served-model-name", "x",       "--tp", "2"};
    c.env = {{"CUDA_VISIBLE_DEVICES", "0,1"}, {"HIP_VISIBLE_DEVICES", "0,1"}};
    cases.push_back(c);
  }
  {
    LaunchCase c{"sim", "sim", engine_config("m", 8000), {}, {}, {}};
    c.engine.served_name = "x";
    c.argv = {
        "cgn-engine-sim", "--flavour",           "vllm", "--model", "m", "--host", "127.0.0.1", "--port",
        "8000",           "--served-model-name", "x"};
    cases.push_back(c);
  }
  {
    LaunchCase c{"external", "external", engine_config("m", 8000), {}, {}, {}};
    c.engine.gpus = {0};
    cases.push_back(c);
  }
  return cases;
}

TEST(Driver, builds_exact_argv_and_env_per_engine) {
  for (const auto& c : launch_cases()) {
    SCOPED_TRACE(c.label);
    auto driver = builtin_drivers().find(c.driver);
    ASSERT_TRUE(driver.ok());
    auto cmd = (*driver)->launch_command(c.engine, c.options);
    ASSERT_TRUE(cmd.ok()) << cmd.error().message;
    EXPECT_EQ(cmd->argv, c.argv);
    EXPECT_EQ(cmd->env, c.env);
  }
}

struct RejectCase {
  std::string driver;
  config::EngineConfig engine;
  LaunchOptions options;
  DriverError error;
  std::string message_part;
};

// Role and kv_offload cells are in driver_matrix_test.cpp; these are the other config errors.
TEST(Driver, rejects_unsupported_combinations_with_named_errors) {
  auto mooncake = [](NodeRole role) {
    LaunchOptions o;
    o.role = role;
    o.pd_transfer_backend = "mooncake";
    return o;
  };
  auto tcp = [](NodeRole role) {
    LaunchOptions o;
    o.role = role;
    o.pd_transfer_backend = "tcp";
    return o;
  };
  auto tp = [](uint32_t t) {
    auto e = engine_config("m", 8000);
    e.tensor_parallel = t;
    return e;
  };
  auto served = engine_config("m", 8000);
  served.served_name = "other";
  // NIXL as the offload but mooncake as the P/D transfer: two answers to one question.
  auto mooncake_nixl_offload = mooncake(NodeRole::kPrefill);
  mooncake_nixl_offload.kv_offload = KvOffload::kNixl;
  const std::vector<RejectCase> cases = {
      {"vllm", engine_config("", 8000), {}, DriverError::kInvalidConfig, "model is required"},
      {"vllm", engine_config("m", 0), {}, DriverError::kInvalidConfig, "port"},
      {"vllm", tp(0), {}, DriverError::kInvalidConfig, "tensor_parallel"},
      {"vllm", engine_config("m", 8000), mooncake(NodeRole::kPrefill), DriverError::kUnsupported,
       "vllm: pd_transfer_backend = \"mooncake\""},
      {"sglang", engine_config("m", 8000), tcp(NodeRole::kDecode), DriverError::kInvalidConfig,
       "pd_transfer_backend must be nixl or mooncake"},
      {"sglang", engine_config("m", 8000), mooncake_nixl_offload, DriverError::kUnsupported,
       "sglang: kv_offload = \"nixl\" with role \"prefill\" is not supported: SGLang uses NIXL only"},
      {"llamacpp", tp(2), {}, DriverError::kUnsupported, "tensor_parallel = 2"},
      {"mlx", served, {}, DriverError::kUnsupported, "served_name"},
      {"mlx", tp(2), {}, DriverError::kUnsupported, "tensor_parallel"},
      {"external", engine_config("m", 0), {}, DriverError::kInvalidConfig, "port"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.driver + " " + c.message_part);
    auto cmd = (*builtin_drivers().find(c.driver))->launch_command(c.engine, c.options);
    ASSERT_FALSE(cmd.ok());
    EXPECT_EQ(cmd.error().code, c.error);
    EXPECT_NE(cmd.error().message.find(c.message_part), std::string::npos) << cmd.error().message;
  }
  auto llama = engine_config("m", 8000);
  LaunchOptions zero_slots;
  zero_slots.parallel_slots = 0;
  EXPECT_FALSE((*builtin_drivers().find("llamacpp"))->launch_command(llama, zero_slots).ok());
}

TEST(Driver, registry_finds_every_builtin_by_name_and_names_the_known_ones_on_miss) {
  const std::vector<std::string> want = {"cgn-infer", "external", "llamacpp", "mlx",
                                         "sglang",    "sim",      "trtllm",   "vllm"};
  EXPECT_EQ(builtin_drivers().names(), want);
  for (const auto& n : want) {
    auto d = builtin_drivers().find(n);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ((*d)->name(), n);
  }
  auto miss = builtin_drivers().find("tgi");
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.error().code, DriverError::kUnknownDriver);
  EXPECT_NE(miss.error().message.find("tgi"), std::string::npos);
  EXPECT_NE(miss.error().message.find("vllm"), std::string::npos);
}

TEST(Driver, metrics_path_and_scrape_kind_per_engine) {
  struct Row {
    std::string driver;
    std::optional<std::string> path;
    std::optional<routing::EngineKind> kind;
  };
  const std::vector<Row> rows = {
      {"vllm", "/metrics", routing::EngineKind::kVllm},
      {"sglang", "/metrics", routing::EngineKind::kSglang},
      {"llamacpp", "/metrics", routing::EngineKind::kLlamaCpp},
      {"trtllm", "/prometheus/metrics", routing::EngineKind::kTrtLlm},
      {"mlx", std::nullopt, std::nullopt},
      {"cgn-infer", "/metrics", std::nullopt},
      {"external", std::nullopt, std::nullopt},
      {"sim", "/metrics", routing::EngineKind::kVllm},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.driver);
    const auto* d = *builtin_drivers().find(r.driver);
    EXPECT_EQ(d->metrics_path({}), r.path);
    EXPECT_EQ(d->metrics_kind({}), r.kind);
    EXPECT_EQ(d->health({}).path, "/health");
    EXPECT_EQ(d->spawns(), r.driver != "external");
  }
}

TEST(Driver, external_takes_the_attached_engines_semantics) {
  const auto* d = *builtin_drivers().find("external");
  LaunchOptions o;
  o.attach_kind = "trtllm";
  EXPECT_EQ(d->metrics_path(o), "/prometheus/metrics");
  EXPECT_EQ(d->metrics_kind(o), routing::EngineKind::kTrtLlm);
  o.attach_kind = "llamacpp";
  EXPECT_EQ(d->health(o).loading_status, 503u);
  o.attach_kind = "nonsense";
  auto cmd = d->launch_command(engine_config("m", 8000), o);
  ASSERT_FALSE(cmd.ok());
  EXPECT_EQ(cmd.error().code, DriverError::kUnknownDriver);
}

TEST(Health, classifies_answers_with_each_engines_semantics) {
  const auto vllm = (*builtin_drivers().find("vllm"))->health({});
  const auto llama = (*builtin_drivers().find("llamacpp"))->health({});
  const HealthAnswer refused{0, ""};
  const HealthAnswer ok{200, ""};
  const HealthAnswer loading{
      503, R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})"};
  const HealthAnswer dead{503, ""};
  // A closed port is loading until the engine was ready once, unhealthy after.
  EXPECT_EQ(classify_health(vllm, refused, false), HealthVerdict::kLoading);
  EXPECT_EQ(classify_health(vllm, refused, true), HealthVerdict::kUnhealthy);
  EXPECT_EQ(classify_health(vllm, ok, false), HealthVerdict::kReady);
  // vLLM's 503 is EngineDeadError, never loading.
  EXPECT_EQ(classify_health(vllm, loading, false), HealthVerdict::kUnhealthy);
  EXPECT_EQ(classify_health(llama, loading, false), HealthVerdict::kLoading);
  EXPECT_EQ(classify_health(llama, dead, false), HealthVerdict::kUnhealthy);
  EXPECT_EQ(classify_health(llama, ok, true), HealthVerdict::kReady);
  EXPECT_EQ(classify_health(llama, HealthAnswer{500, "Loading model"}, false), HealthVerdict::kUnhealthy);
}

TEST(KvOffload, parses_every_documented_value_and_rejects_others) {
  for (std::string_view s : {"none", "nixl", "lmcache", "hicache", "kvbm", "cgn"}) {
    auto k = parse_kv_offload(s);
    ASSERT_TRUE(k.has_value()) << s;
    EXPECT_EQ(to_string(*k), s);
  }
  EXPECT_FALSE(parse_kv_offload("NIXL").has_value());
  EXPECT_FALSE(parse_kv_offload("").has_value());
}

}  // namespace
}  // namespace cgn::agent
