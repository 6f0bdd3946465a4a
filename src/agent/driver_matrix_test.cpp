// The driver matrix: every registered driver × every kv_offload × every role is one expectation
// here, either the exact line (argv after the engine's own line, and env) or a named error. A
// driver, offload or role without a row fails the test, and so does a row no cell uses. The same
// matrix is the table in docs/agent.md "kv_offload and roles".
#include <gtest/gtest.h>

#include <set>

#include "agent/driver.h"

namespace cgn::agent {
namespace {

using routing::NodeRole;
using Argv = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

constexpr KvOffload kOffloads[] = {KvOffload::kNone,    KvOffload::kNixl, KvOffload::kLmcache,
                                   KvOffload::kHicache, KvOffload::kKvbm, KvOffload::kCgn};
constexpr NodeRole kRoles[] = {NodeRole::kBoth, NodeRole::kPrefill, NodeRole::kDecode};

// The expected --kv-transfer-config values, written out (not built by the code under test).
constexpr const char* kNixl = R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})";
constexpr const char* kLmcache = R"({"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"})";
constexpr const char* kKvbm =
    R"({"kv_connector":"DynamoConnector","kv_role":"kv_both","kv_connector_module_path":"kvbm.vllm_integration.connector"})";
constexpr const char* kCgn =
    R"({"kv_connector":"CognitoraConnector","kv_role":"kv_both","kv_connector_module_path":"cgn_kv_connector.connector",)"
    R"("kv_connector_extra_config":{"kvcached_target":"127.0.0.1:9400","kvcached_socket":"/run/cognitora/kvcached.sock"}})";
constexpr const char* kNixlLmcache =
    R"({"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[)"
    R"({"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}]}})";
constexpr const char* kNixlCgn =
    R"({"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[)"
    R"({"kv_connector":"NixlConnector","kv_role":"kv_both"},)"
    R"({"kv_connector":"CognitoraConnector","kv_role":"kv_both","kv_connector_module_path":"cgn_kv_connector.connector",)"
    R"("kv_connector_extra_config":{"kvcached_target":"127.0.0.1:9400","kvcached_socket":"/run/cognitora/kvcached.sock"}}]}})";
constexpr const char* kKvbmNixl =
    R"({"kv_connector":"PdConnector","kv_role":"kv_both","kv_connector_module_path":"kvbm.vllm_integration.connector",)"
    R"("kv_connector_extra_config":{"connectors":[)"
    R"({"kv_connector":"DynamoConnector","kv_role":"kv_both","kv_connector_module_path":"kvbm.vllm_integration.connector"},)"
    R"({"kv_connector":"NixlConnector","kv_role":"kv_both"}]}})";

const Env kSideChannel = {{"VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"}};

// One row: a line (tail after the engine's own line, and env) or, when error is set, a named
// error whose message contains it.
struct Expect {
  Argv tail;
  Env env;
  std::string error;
};
Expect line(Argv tail, Env env = {}) {
  return {std::move(tail), std::move(env), ""};
}
Expect fails(std::string why) {
  return {{}, {}, std::move(why)};
}

struct Row {
  std::string engine;
  KvOffload offload;
  std::vector<NodeRole> roles;
  Expect expect;
};

const std::vector<NodeRole> kAny = {NodeRole::kBoth, NodeRole::kPrefill, NodeRole::kDecode};
const std::vector<NodeRole> kAgg = {NodeRole::kBoth};
const std::vector<NodeRole> kPd = {NodeRole::kPrefill, NodeRole::kDecode};
const std::vector<NodeRole> kPrefillOnly = {NodeRole::kPrefill};
const std::vector<NodeRole> kDecodeOnly = {NodeRole::kDecode};

Argv sglang_pd(NodeRole role, Argv more = {}) {
  Argv a = {"--disaggregation-mode", role == NodeRole::kPrefill ? "prefill" : "decode",
            "--disaggregation-transfer-backend", "nixl"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// A plain engine (no P/D split, no offload): none/both runs, every other cell names its reason.
void plain_rows(std::vector<Row>& rows, const std::string& engine, const std::string& no_pd,
                const std::string& no_offload) {
  rows.push_back({engine, KvOffload::kNone, kAgg, line({})});
  for (auto o : kOffloads) {
    if (o != KvOffload::kNone) {
      rows.push_back({engine, o, kAgg, fails(no_offload)});
    }
    rows.push_back({engine, o, kPd, fails(no_pd)});
  }
}

std::vector<Row> matrix() {
  std::vector<Row> rows = {
      {"vllm", KvOffload::kNone, kAgg, line({})},
      {"vllm", KvOffload::kNone, kPd, line({"--kv-transfer-config", kNixl}, kSideChannel)},
      {"vllm", KvOffload::kNixl, kAny, line({"--kv-transfer-config", kNixl}, kSideChannel)},
      {"vllm", KvOffload::kLmcache, kAgg, line({"--kv-transfer-config", kLmcache})},
      {"vllm", KvOffload::kLmcache, kPd, line({"--kv-transfer-config", kNixlLmcache}, kSideChannel)},
      {"vllm", KvOffload::kHicache, kAny, fails("HiCache is SGLang's hierarchical cache")},
      {"vllm", KvOffload::kKvbm, kAgg, line({"--kv-transfer-config", kKvbm})},
      {"vllm", KvOffload::kKvbm, kPrefillOnly, line({"--kv-transfer-config", kKvbmNixl}, kSideChannel)},
      {"vllm", KvOffload::kKvbm, kDecodeOnly, fails("Dynamo runs KVBM on prefill workers only")},
      {"vllm", KvOffload::kCgn, kAgg, line({"--kv-transfer-config", kCgn})},
      {"vllm", KvOffload::kCgn, kPd, line({"--kv-transfer-config", kNixlCgn}, kSideChannel)},

      {"sglang", KvOffload::kNone, kAgg, line({})},
      {"sglang", KvOffload::kNone, kPrefillOnly, line(sglang_pd(NodeRole::kPrefill))},
      {"sglang", KvOffload::kNone, kDecodeOnly, line(sglang_pd(NodeRole::kDecode))},
      {"sglang", KvOffload::kNixl, kAgg,
       fails("SGLang uses NIXL only to move KV between prefill and decode")},
      {"sglang", KvOffload::kNixl, kPrefillOnly, line(sglang_pd(NodeRole::kPrefill))},
      {"sglang", KvOffload::kNixl, kDecodeOnly, line(sglang_pd(NodeRole::kDecode))},
      {"sglang", KvOffload::kLmcache, kAgg, line({"--enable-lmcache"})},
      {"sglang", KvOffload::kLmcache, kPd, fails("--enable-lmcache for an aggregated server only")},
      {"sglang", KvOffload::kHicache, kAgg, line({"--enable-hierarchical-cache"})},
      {"sglang", KvOffload::kHicache, kPrefillOnly,
       line(sglang_pd(NodeRole::kPrefill, {"--enable-hierarchical-cache"}))},
      {"sglang", KvOffload::kHicache, kDecodeOnly, fails("SGLang runs HiCache on prefill nodes")},
      {"sglang", KvOffload::kKvbm, kAny, fails("no flag that loads Dynamo's KVBM")},
      {"sglang", KvOffload::kCgn, kAny, fails("not yet: no HiCache storage backend for cgn-kvcached")},

      {"trtllm", KvOffload::kNone, kAgg, line({})},
      {"trtllm", KvOffload::kNixl, kAgg,
       fails("context and generation servers of `trtllm-serve disaggregated`")},
      {"trtllm", KvOffload::kHicache, kAgg, fails("HiCache is SGLang's hierarchical cache")},
      {"trtllm", KvOffload::kLmcache, kAgg, fails("not yet: TensorRT-LLM loads a KV connector only from")},
      {"trtllm", KvOffload::kKvbm, kAgg, fails("not yet: TensorRT-LLM loads a KV connector only from")},
      {"trtllm", KvOffload::kCgn, kAgg, fails("cgn-kv-connector implements vLLM's connector interface")},

      {"sim", KvOffload::kNone, kAny, line({})},
      {"sim", KvOffload::kCgn, kAny, line({"--kvcached-target", "127.0.0.1:9400"})},
      {"external", KvOffload::kNone, kAny, line({})},
  };
  for (auto o : kOffloads) {
    rows.push_back(
        {"trtllm", o, kPd, fails("TensorRT-LLM's prefill/decode split is cache_transceiver_config")});
    if (o != KvOffload::kNone && o != KvOffload::kCgn) {
      rows.push_back({"sim", o, kAny, fails("cgn-engine-sim offloads only to cgn-kvcached")});
    }
    if (o != KvOffload::kNone) {
      // Nothing is spawned: whatever runs there was launched with its own flags.
      rows.push_back({"external", o, kAny, line({})});
    }
  }
  plain_rows(rows, "llamacpp", "llama.cpp has no prefill/decode split",
             "llama.cpp has no KV connector interface");
  plain_rows(rows, "mlx", "mlx_lm.server has no prefill/decode split",
             "mlx_lm.server has no KV connector interface");
  plain_rows(rows, "cgn-infer", "not yet: the provisional cgn-infer line has no prefill/decode flags",
             "not yet: the provisional cgn-infer line has no KV offload flags");
  return rows;
}

// Each engine's own line for model "m" on 127.0.0.1:8000, TP 1, default options.
Argv base_line(const std::string& engine) {
  const std::map<std::string, Argv> lines = {
      {"vllm",
       {"vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8000", "--served-model-name", "m",
        "--tensor-parallel-size", "1"}},
      {"sglang",
       {"python3", "-m", "sglang.launch_server", "--model-path", "m", "--host", "127.0.0.1", "--port", "8000",
        "--enable-metrics", "--tp", "1"}},
      {"trtllm", {"trtllm-serve", "m", "--host", "127.0.0.1", "--port", "8000", "--tp_size", "1"}},
      {"llamacpp",
       {"llama-server", "-m", "m", "--host", "127.0.0.1", "--port", "8000", "--parallel", "4", "--metrics"}},
      {"mlx", {"mlx_lm.server", "--model", "m", "--host", "127.0.0.1", "--port", "8000"}},
      {"cgn-infer",
       {"cgn-infer", "--model", "m", "--host", "127.0.0.1", "--port", "8000", "--served-model-name", "m",
        "--tp", "1"}},
      {"sim",
       {"cgn-engine-sim", "--flavour", "vllm", "--model", "m", "--host", "127.0.0.1", "--port", "8000",
        "--served-model-name", "m"}},
      {"external", {}},
  };
  auto it = lines.find(engine);
  return it == lines.end() ? Argv{"<no base line for " + engine + ">"} : it->second;
}

// Model "m" on port 8000, every other [engine] key at its default.
config::EngineConfig engine_m() {
  config::EngineConfig e;
  e.model = "m";
  e.port = 8000;
  return e;
}

std::string cell_name(const std::string& engine, KvOffload o, NodeRole r) {
  return engine + " kv_offload=" + std::string(to_string(o)) + " role=" + std::string(routing::to_string(r));
}

// One cell against its row (ASSERTs end this cell only).
void check_cell(const std::string& engine, KvOffload o, NodeRole r, const Expect& want) {
  const auto e = engine_m();
  LaunchOptions opts;
  opts.role = r;
  opts.kv_offload = o;
  auto cmd = (*builtin_drivers().find(engine))->launch_command(e, opts);
  if (!want.error.empty()) {
    ASSERT_FALSE(cmd.ok()) << "expected an error";
    EXPECT_EQ(cmd.error().code, DriverError::kUnsupported);
    const std::string head = engine + ": kv_offload = \"" + std::string(to_string(o)) + "\" with role \"" +
                             std::string(routing::to_string(r)) + "\" is not supported: ";
    EXPECT_EQ(cmd.error().message.rfind(head, 0), 0u) << cmd.error().message;
    EXPECT_NE(cmd.error().message.find(want.error), std::string::npos) << cmd.error().message;
    return;
  }
  ASSERT_TRUE(cmd.ok()) << cmd.error().message;
  Argv argv = base_line(engine);
  argv.insert(argv.end(), want.tail.begin(), want.tail.end());
  EXPECT_EQ(cmd->argv, argv);
  EXPECT_EQ(cmd->env, want.env);
}

TEST(DriverMatrix, every_engine_offload_and_role_has_one_row_and_gets_its_line_or_named_error) {
  const auto rows = matrix();
  std::set<size_t> used;
  for (const auto& engine : builtin_drivers().names()) {
    for (auto o : kOffloads) {
      for (auto r : kRoles) {
        const std::string cell = cell_name(engine, o, r);
        SCOPED_TRACE(cell);
        std::vector<size_t> hits;
        for (size_t i = 0; i < rows.size(); ++i) {
          const auto& row = rows[i];
          if (row.engine == engine && row.offload == o &&
              std::find(row.roles.begin(), row.roles.end(), r) != row.roles.end()) {
            hits.push_back(i);
          }
        }
        if (hits.size() != 1) {
          ADD_FAILURE() << "the matrix needs exactly one row for " << cell << ", has " << hits.size();
          continue;
        }
        used.insert(hits[0]);
        check_cell(engine, o, r, rows[hits[0]].expect);
      }
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_TRUE(used.contains(i)) << "row " << i << " (" << rows[i].engine << " "
                                  << to_string(rows[i].offload) << ") matches no driver";
  }
}

TEST(DriverMatrix, cognitora_connector_carries_the_configured_kvcached_as_json_strings) {
  const auto e = engine_m();
  LaunchOptions opts;
  opts.kv_offload = KvOffload::kCgn;
  opts.kvcached_target = "10.0.0.7:9500";
  opts.kvcached_socket = R"(/run/a "b"\c.sock)";
  auto cmd = (*builtin_drivers().find("vllm"))->launch_command(e, opts);
  ASSERT_TRUE(cmd.ok()) << cmd.error().message;
  ASSERT_GE(cmd->argv.size(), 2u);
  EXPECT_EQ(cmd->argv[cmd->argv.size() - 2], "--kv-transfer-config");
  EXPECT_EQ(
      cmd->argv.back(),
      R"({"kv_connector":"CognitoraConnector","kv_role":"kv_both","kv_connector_module_path":"cgn_kv_connector.connector",)"
      R"("kv_connector_extra_config":{"kvcached_target":"10.0.0.7:9500","kvcached_socket":"/run/a \"b\"\\c.sock"}})");
}

TEST(DriverMatrix, nixl_side_channel_and_pd_backend_apply_to_every_multiconnector_line) {
  const auto e = engine_m();
  for (auto o : {KvOffload::kLmcache, KvOffload::kCgn, KvOffload::kKvbm}) {
    SCOPED_TRACE(std::string(to_string(o)));
    LaunchOptions opts;
    opts.role = NodeRole::kPrefill;
    opts.kv_offload = o;
    opts.nixl_side_channel_host = "10.0.0.5";
    opts.nixl_side_channel_port = 5559;
    auto cmd = (*builtin_drivers().find("vllm"))->launch_command(e, opts);
    ASSERT_TRUE(cmd.ok()) << cmd.error().message;
    EXPECT_EQ(cmd->env,
              (Env{{"VLLM_NIXL_SIDE_CHANNEL_HOST", "10.0.0.5"}, {"VLLM_NIXL_SIDE_CHANNEL_PORT", "5559"}}));
    opts.pd_transfer_backend = "mooncake";
    auto rejected = (*builtin_drivers().find("vllm"))->launch_command(e, opts);
    ASSERT_FALSE(rejected.ok());
    EXPECT_NE(rejected.error().message.find("pd_transfer_backend = \"mooncake\""), std::string::npos);
  }
}

}  // namespace
}  // namespace cgn::agent
