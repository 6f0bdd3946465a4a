#include "core/config.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "testing/config_env.h"
#include "testing/process.h"

namespace cgn::config {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Result<CognitoraConfig, ConfigError> load(std::string_view text,
                                          std::map<std::string, std::string> env = {}) {
  return load_config_from_string(text, "cognitora.toml", testing::map_env(std::move(env)));
}

// The whole message of a failed load (every diagnostic, one per line).
std::string error_of(std::string_view text, std::map<std::string, std::string> env = {}) {
  auto r = load(text, std::move(env));
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << text;
  return r.ok() ? std::string() : r.error().message;
}

ConfigError code_of(std::string_view text) {
  auto r = load(text);
  EXPECT_FALSE(r.ok());
  return r.ok() ? ConfigError::io : r.error().code;
}

TEST(Config, EmptyFileGivesDocumentedDefaults) {
  auto r = load("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CognitoraConfig& c = r.value();
  EXPECT_EQ(c.source, "cognitora.toml");
  EXPECT_EQ(c.log.level, "info");
  EXPECT_EQ(c.log.file, "");
  EXPECT_EQ(c.router.listen, "0.0.0.0:8080");
  EXPECT_EQ(c.router.policy, "kv");
  EXPECT_EQ(c.router.state_backend, "static");
  EXPECT_TRUE(c.router.api_keys.empty());
  EXPECT_EQ(c.router.limits.max_body_bytes, 8u << 20);
  EXPECT_EQ(c.router.limits.max_json_depth, 64u);
  EXPECT_EQ(c.router.limits.max_messages, 4096u);
  EXPECT_EQ(c.router.limits.max_header_bytes, 16u << 10);
  EXPECT_EQ(c.router.limits.max_connections, 4096u);
  EXPECT_EQ(c.router.limits.max_buffered_bytes, uint64_t{1} << 30);
  EXPECT_EQ(c.router.limits.reject_log_interval_s, 10u);
  EXPECT_EQ(c.router.metrics.listen, "");
  EXPECT_TRUE(c.router.metrics.key.empty());
  EXPECT_EQ(c.router.timeouts.connect_ms, 2000u);
  EXPECT_EQ(c.router.timeouts.continue_ms, 2000u);
  EXPECT_EQ(c.router.routing.block_bytes, 256u);
  EXPECT_EQ(c.router.routing.index_ttl_s, 120u);
  EXPECT_EQ(c.router.routing.max_staleness_ms, 30000u);
  EXPECT_DOUBLE_EQ(c.router.routing.weights.ram_tier_credit, 0.75);
  EXPECT_DOUBLE_EQ(c.router.routing.weights.ssd_tier_credit, 0.25);
  EXPECT_EQ(c.router.routing.load_guard.max_queue_depth, 64u);
  EXPECT_EQ(c.router.admission.max_queue, 256u);
  EXPECT_TRUE(c.router.nodes.empty());
  EXPECT_EQ(c.state.etcd.endpoints, std::vector<std::string>{"http://127.0.0.1:2379"});
  EXPECT_EQ(c.state.etcd.lease_ttl_s, 5u);
  EXPECT_EQ(c.state.gossip.listen, "0.0.0.0:7946");
  EXPECT_EQ(c.state.gossip.cluster_id, "cognitora");
  EXPECT_TRUE(c.state.gossip.secret.empty());
  EXPECT_EQ(c.agent.listen, "0.0.0.0:9090");
  EXPECT_DOUBLE_EQ(c.agent.watt_limit, 0.0);
  EXPECT_EQ(c.agent.state_backend, "static");
  EXPECT_EQ(c.agent.publish_interval_ms, 250u);
  EXPECT_EQ(c.agent.max_published_prefixes, 4096u);
  EXPECT_TRUE(c.agent.engine_metrics);
  EXPECT_EQ(c.engine.kind, "vllm");
  EXPECT_EQ(c.engine.port, 8000);
  EXPECT_EQ(c.engine.tensor_parallel, 1u);
  EXPECT_EQ(c.engine.kv_offload, "none");
  EXPECT_EQ(c.engine.role, "both");
  EXPECT_EQ(c.engine.parallel_slots, 4u);
  EXPECT_EQ(c.engine.page_size, 0u);
  EXPECT_EQ(c.engine.pd_transfer_backend, "nixl");
  EXPECT_EQ(c.agent.grpc_listen, "0.0.0.0:9091");
  EXPECT_EQ(c.agent.scrape_interval_ms, 2000u);
  EXPECT_EQ(c.agent.restart_backoff_initial_ms, 1000u);
  EXPECT_EQ(c.agent.restart_backoff_max_ms, 60000u);
}

TEST(Config, ReadsEverySectionTyped) {
  auto r = load(R"(
[log]
level = "debug"
file = "/tmp/x.log"
[router]
listen = "127.0.0.1:9000"
policy = "least_load"
state_backend = "etcd"
[router.limits]
max_body_bytes = 1024
[router.timeouts]
idle_ms = 5
continue_ms = 0
[router.routing]
block_bytes = 128
[router.routing.weights]
prefill_ms_per_block = 2     # an integer is accepted for a float
temperature = 0.5
[router.routing.load_guard]
max_kv_used = 0.5
[state.etcd]
endpoints = ["http://a:1", "http://b:2"]
lease_ttl_s = 30
[state.gossip]
seeds = ["10.0.0.1:7946", "[::1]:7946"]
[agent]
node_id = "gpu-7"
watt_limit = 350.5
state_backend = "etcd"
publish_interval_ms = 100
max_published_prefixes = 1000
engine_metrics = false
[engine]
kind = "sglang"
model = "m"
port = 30000
tensor_parallel = 2
extra_args = ["--x", "y z"]
kv_offload = true
gpus = [0, 3]
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CognitoraConfig& c = r.value();
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.log.file, "/tmp/x.log");
  EXPECT_EQ(c.router.listen, "127.0.0.1:9000");
  EXPECT_EQ(c.router.policy, "least_load");
  EXPECT_EQ(c.router.state_backend, "etcd");
  EXPECT_EQ(c.router.limits.max_body_bytes, 1024u);
  EXPECT_EQ(c.router.limits.max_json_depth, 64u);  // untouched sibling keeps its default
  EXPECT_EQ(c.router.timeouts.idle_ms, 5u);
  EXPECT_EQ(c.router.timeouts.continue_ms, 0u);
  EXPECT_EQ(c.router.routing.block_bytes, 128u);
  EXPECT_DOUBLE_EQ(c.router.routing.weights.prefill_ms_per_block, 2.0);
  EXPECT_DOUBLE_EQ(c.router.routing.weights.temperature, 0.5);
  EXPECT_DOUBLE_EQ(c.router.routing.load_guard.max_kv_used, 0.5);
  EXPECT_EQ(c.state.etcd.endpoints, (std::vector<std::string>{"http://a:1", "http://b:2"}));
  EXPECT_EQ(c.state.etcd.lease_ttl_s, 30u);
  EXPECT_EQ(c.state.gossip.seeds, (std::vector<std::string>{"10.0.0.1:7946", "[::1]:7946"}));
  EXPECT_EQ(c.agent.node_id, "gpu-7");
  EXPECT_DOUBLE_EQ(c.agent.watt_limit, 350.5);
  EXPECT_EQ(c.agent.state_backend, "etcd");
  EXPECT_EQ(c.agent.publish_interval_ms, 100u);
  EXPECT_EQ(c.agent.max_published_prefixes, 1000u);
  EXPECT_FALSE(c.agent.engine_metrics);
  EXPECT_EQ(c.engine.kind, "sglang");
  EXPECT_EQ(c.engine.model, "m");
  EXPECT_EQ(c.engine.port, 30000);
  EXPECT_EQ(c.engine.tensor_parallel, 2u);
  EXPECT_EQ(c.engine.extra_args, (std::vector<std::string>{"--x", "y z"}));
  EXPECT_EQ(c.engine.kv_offload, "cgn");  // the older boolean form
  EXPECT_EQ(c.engine.gpus, (std::vector<uint32_t>{0, 3}));
}

TEST(Config, ExampleFileLoadsAndMatchesDefaults) {
  auto r = load_config(testing::source_path("docs/examples/cognitora.toml"),
                       testing::map_env({{"CGN_API_KEYS", "k1,k2"}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CognitoraConfig& c = r.value();
  EXPECT_EQ(c.router.api_keys_from_env(), (std::vector<std::string>{"k1", "k2"}));
  ASSERT_EQ(c.router.nodes.size(), 2u);
  EXPECT_EQ(c.router.nodes[0].name, "gpu-a");
  EXPECT_EQ(c.router.nodes[1].name, "10.0.0.12:9090");
  EXPECT_EQ(c.router.admission.max_queue_for("meta-llama/Llama-3.1-8B-Instruct", "prefill"), 16u);
  // Apart from the marked examples, the file states the defaults: the dumps agree.
  CognitoraConfig defaults;
  defaults.source = c.source;
  defaults.router.api_keys = c.router.api_keys;
  defaults.router.nodes = c.router.nodes;
  defaults.router.admission.models = c.router.admission.models;
  EXPECT_EQ(dump_config(c), dump_config(defaults));
}

TEST(Config, TypeMismatchNamesFileLineColumnKeyAndTypes) {
  EXPECT_EQ(error_of("[router]\nlisten = 8080\n"),
            "cognitora.toml:2:10: key 'router.listen' expected string, got integer");
  EXPECT_EQ(error_of("[router]\n  policy = true\n"),
            "cognitora.toml:2:12: key 'router.policy' expected string, got boolean");
  EXPECT_EQ(error_of("[router.limits]\nmax_body_bytes = \"8M\"\n"),
            "cognitora.toml:2:18: key 'router.limits.max_body_bytes' expected integer, got string");
  EXPECT_EQ(error_of("[router.routing.weights]\ntemperature = \"hot\"\n"),
            "cognitora.toml:2:15: key 'router.routing.weights.temperature' expected number, got string");
  EXPECT_EQ(error_of("[engine]\nkv_offload = 1\n"),
            "cognitora.toml:2:14: key 'engine.kv_offload' expected string, got integer");
  EXPECT_EQ(error_of("[engine]\nextra_args = \"--x\"\n"),
            "cognitora.toml:2:14: key 'engine.extra_args' expected array of strings, got string");
  EXPECT_EQ(error_of("router = 5\n"), "cognitora.toml:1:10: key 'router' expected table, got integer");
  EXPECT_EQ(error_of("router = { nodes = 1 }\n"),
            "cognitora.toml:1:20: key 'router.nodes' expected array of tables, got integer");
  EXPECT_EQ(code_of("[router]\nlisten = 8080\n"), ConfigError::wrong_type);
}

TEST(Config, ArrayElementsAreCheckedWithTheirIndex) {
  EXPECT_EQ(error_of("[engine]\nextra_args = [\"a\", 2]\n"),
            "cognitora.toml:2:20: key 'engine.extra_args[1]' expected string, got integer");
  EXPECT_EQ(error_of("[engine]\ngpus = [0, 2000]\n"),
            "cognitora.toml:2:12: key 'engine.gpus[1]' expected integer in [0, 1023], got 2000");
  EXPECT_EQ(error_of("[state.gossip]\nseeds = [\"a:1\", \"nope\"]\n"),
            "cognitora.toml:2:17: key 'state.gossip.seeds[1]' expected HOST:PORT, got \"nope\"");
  EXPECT_EQ(error_of("[state.etcd]\nendpoints = [\"127.0.0.1:2379\"]\n"),
            "cognitora.toml:2:14: key 'state.etcd.endpoints[0]' expected an http:// or https:// URL, got "
            "\"127.0.0.1:2379\"");
}

// One unknown key in every table of the schema, each reported with its full dotted path.
struct UnknownKeyCase {
  std::string doc;   // the key 'bogus' sits on line 2, column 1 unless `where` says otherwise
  std::string path;  // the expected dotted path
  std::string where = "2:1";
};

class UnknownKeys : public ::testing::TestWithParam<UnknownKeyCase> {};

TEST_P(UnknownKeys, AreErrorsWithDottedPathAndPosition) {
  const UnknownKeyCase& c = GetParam();
  auto r = load(c.doc);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ConfigError::unknown_key);
  EXPECT_EQ(r.error().message, fmt::format("cognitora.toml:{}: unknown key '{}'", c.where, c.path));
}

INSTANTIATE_TEST_SUITE_P(
    EveryLevel, UnknownKeys,
    ::testing::Values(
        UnknownKeyCase{"\nbogus = 1\n", "bogus"}, UnknownKeyCase{"[log]\nbogus = 1\n", "log.bogus"},
        UnknownKeyCase{"[router]\nbogus = 1\n", "router.bogus"},
        UnknownKeyCase{"[router.limits]\nbogus = 1\n", "router.limits.bogus"},
        UnknownKeyCase{"[router.timeouts]\nbogus = 1\n", "router.timeouts.bogus"},
        UnknownKeyCase{"[router.routing]\nbogus = 1\n", "router.routing.bogus"},
        UnknownKeyCase{"[router.routing.weights]\nbogus = 1\n", "router.routing.weights.bogus"},
        UnknownKeyCase{"[router.routing.load_guard]\nbogus = 1\n", "router.routing.load_guard.bogus"},
        UnknownKeyCase{"[router.admission]\nbogus = 1\n", "router.admission.bogus"},
        UnknownKeyCase{"[router.admission.models]\nbogus = 1\n", "router.admission.models.bogus"},
        UnknownKeyCase{"[router.admission.models.\"m/x.y\"]\nbogus = 1\n",
                       "router.admission.models.\"m/x.y\".bogus"},
        UnknownKeyCase{"[[router.nodes]]\nbogus = 1\nurl = \"http://a:1\"\n", "router.nodes[0].bogus"},
        UnknownKeyCase{"[[router.nodes]]\nurl = \"http://a:1\"\n[[router.nodes]]\nurl = \"http://b:1\"\n"
                       "bogus = 1\n",
                       "router.nodes[1].bogus", "5:1"},
        UnknownKeyCase{"[state]\nbogus = 1\n", "state.bogus"},
        UnknownKeyCase{"[state.etcd]\nbogus = 1\n", "state.etcd.bogus"},
        UnknownKeyCase{"[state.gossip]\nbogus = 1\n", "state.gossip.bogus"},
        UnknownKeyCase{"[agent]\nbogus = 1\n", "agent.bogus"},
        UnknownKeyCase{"[engine]\nbogus = 1\n", "engine.bogus"},
        UnknownKeyCase{"[engine.sub]\nbogus = 1\n", "engine.sub", "1:9"}));

TEST(Config, UnknownKeySuggestsTheNearestKnownKey) {
  EXPECT_EQ(error_of("[router]\nlisen = \"a:1\"\n"),
            "cognitora.toml:2:1: unknown key 'router.lisen' (did you mean 'listen'?)");
  EXPECT_EQ(error_of("[engine]\ntensor_paralel = 2\n"),
            "cognitora.toml:2:1: unknown key 'engine.tensor_paralel' (did you mean 'tensor_parallel'?)");
}

TEST(Config, EveryProblemInTheFileIsReportedInOrder) {
  auto r = load("[router]\nlisten = 1\npolicy = \"x\"\nbogus = 2\n[engine]\nport = 0\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ConfigError::wrong_type);  // the first problem decides the code
  EXPECT_EQ(
      r.error().message,
      "cognitora.toml:2:10: key 'router.listen' expected string, got integer\n"
      "cognitora.toml:3:10: key 'router.policy' expected one of kv|round_robin|random|least_load|session, "
      "got \"x\"\n"
      "cognitora.toml:4:1: unknown key 'router.bogus'\n"
      "cognitora.toml:6:8: key 'engine.port' expected integer in [1, 65535], got 0");
}

TEST(Config, ProblemsAreListedInFileOrderNotSchemaOrder) {
  auto r = load("[engine]\nport = 0\n[router]\nlisten = 1\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ConfigError::out_of_range);  // engine.port comes first in the file
  EXPECT_EQ(r.error().message,
            "cognitora.toml:2:8: key 'engine.port' expected integer in [1, 65535], got 0\n"
            "cognitora.toml:4:10: key 'router.listen' expected string, got integer");
}

TEST(Config, MissingRequiredKeyNamesTheTable) {
  auto r = load("[router]\n[[router.nodes]]\nname = \"a\"\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ConfigError::missing_key);
  EXPECT_EQ(r.error().message, "cognitora.toml:2:1: missing required key 'router.nodes[0].url'");
}

TEST(Config, OutOfRangeNamesTheRange) {
  EXPECT_EQ(error_of("[router.routing]\nblock_bytes = 2048\n"),
            "cognitora.toml:2:15: key 'router.routing.block_bytes' expected integer in [64, 1024], got 2048");
  EXPECT_EQ(error_of("[router.routing]\nblock_bytes = 100\n"),
            "cognitora.toml:2:15: key 'router.routing.block_bytes' expected a multiple of 64 in [64, 1024], "
            "got 100");
  EXPECT_EQ(
      error_of("[router.routing.weights]\nram_tier_credit = 1.5\n"),
      "cognitora.toml:2:19: key 'router.routing.weights.ram_tier_credit' expected number in [0, 1], got 1.5");
  EXPECT_EQ(error_of("[router.limits]\nmax_json_depth = -1\n"),
            "cognitora.toml:2:18: key 'router.limits.max_json_depth' expected integer in [1, 1024], got -1");
  EXPECT_EQ(
      error_of("[router.routing.weights]\ntemperature = nan\n"),
      "cognitora.toml:2:15: key 'router.routing.weights.temperature' expected number in [0, 1000], got nan");
  EXPECT_EQ(code_of("[router.routing]\nblock_bytes = 2048\n"), ConfigError::out_of_range);
  EXPECT_EQ(code_of("[router.routing]\nblock_bytes = 100\n"), ConfigError::bad_value);
  for (uint32_t ok : {64u, 256u, 1024u}) {
    auto r = load(fmt::format("[router.routing]\nblock_bytes = {}\n", ok));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->router.routing.block_bytes, ok);
  }
}

TEST(Config, EnumsListTheAllowedValues) {
  EXPECT_EQ(
      error_of("[router]\nstate_backend = \"consul\"\n"),
      "cognitora.toml:2:17: key 'router.state_backend' expected one of static|etcd|gossip, got \"consul\"");
  EXPECT_EQ(
      error_of("[log]\nlevel = \"verbose\"\n"),
      "cognitora.toml:2:9: key 'log.level' expected one of trace|debug|info|warn|error|off, got \"verbose\"");
  EXPECT_EQ(
      error_of("[[router.nodes]]\nurl = \"http://a:1\"\nrole = \"both \"\n"),
      "cognitora.toml:3:8: key 'router.nodes[0].role' expected one of prefill|decode|both, got \"both \"");
  EXPECT_EQ(error_of("[engine]\nkind = \"vLLM\"\n"),
            "cognitora.toml:2:8: key 'engine.kind' expected one of "
            "vllm|sglang|trtllm|llamacpp|mlx|cgn-infer|sim|external, "
            "got \"vLLM\"");
}

TEST(Config, TopLevelStateBackendAppliesToRouterAndAgent) {
  auto r = load("state_backend = \"etcd\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->router.state_backend, "etcd");
  EXPECT_EQ(r->agent.state_backend, "etcd");
  auto same = load("state_backend = \"gossip\"\n[router]\nstate_backend = \"gossip\"\n");
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_EQ(same->agent.state_backend, "gossip");
  EXPECT_EQ(error_of("state_backend = \"etcd\"\n[agent]\nstate_backend = \"gossip\"\n"),
            "cognitora.toml:1:17: key 'state_backend' is \"etcd\" but 'agent.state_backend' is \"gossip\"; "
            "give one "
            "value or set it in one place");
  EXPECT_EQ(error_of("state_backend = \"consul\"\n"),
            "cognitora.toml:1:17: key 'state_backend' expected one of static|etcd|gossip, got \"consul\"");
  auto back = load(dump_config(*r));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->state_backend, "etcd");
}

TEST(Config, IndexMaxEntriesIsZeroForAutoOrAtLeast1024) {
  EXPECT_EQ(load("").value().router.routing.index_max_entries, 0u);
  EXPECT_EQ(load("[router.routing]\nindex_max_entries = 5000\n").value().router.routing.index_max_entries,
            5000u);
  EXPECT_EQ(error_of("[router.routing]\nindex_max_entries = 10\n"),
            "cognitora.toml:2:21: key 'router.routing.index_max_entries' expected 0 (sized from the engines' "
            "capacity) or a value in [1024, 4294967296], got 10");
}

TEST(Config, AddressesAreValidated) {
  for (const char* bad : {"localhost", ":80", "host:", "host:65536", "host:8o", "a b:1", "[::1:80"}) {
    EXPECT_EQ(error_of(fmt::format("[router]\nlisten = \"{}\"\n", bad)),
              fmt::format("cognitora.toml:2:10: key 'router.listen' expected HOST:PORT, got \"{}\"", bad));
  }
  for (const char* good : {"0.0.0.0:0", "localhost:65535", "[::]:8080", "my-host.example:80"}) {
    auto r = load(fmt::format("[router]\nlisten = \"{}\"\n", good));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->router.listen, good);
  }
  EXPECT_EQ(
      error_of("[[router.nodes]]\nurl = \"ftp://x\"\n"),
      "cognitora.toml:2:7: key 'router.nodes[0].url' expected an http:// or https:// URL, got \"ftp://x\"");
  EXPECT_EQ(
      error_of("[agent]\nnode_id = \"a/b\"\n"),
      "cognitora.toml:2:11: key 'agent.node_id' expected at most 128 characters from [A-Za-z0-9._-] (it is a "
      "key in etcd and a metric label)");
  EXPECT_EQ(error_of("[agent]\npublish_interval_ms = 5\n"),
            "cognitora.toml:2:23: key 'agent.publish_interval_ms' expected integer in [10, 60000], got 5");
  EXPECT_EQ(
      error_of("[agent]\nmax_published_prefixes = 5000\n"),
      "cognitora.toml:2:26: key 'agent.max_published_prefixes' expected integer in [0, 4096], got 5000");
}

TEST(Config, StateSectionsAreChecked) {
  EXPECT_EQ(
      error_of("[state.etcd]\nendpoints = []\nprefix = \"cgn\\u0001\"\nlease_ttl_s = 1\n"),
      "cognitora.toml:2:13: key 'state.etcd.endpoints' expected at least one endpoint, got []\n"
      "cognitora.toml:3:10: key 'state.etcd.prefix' expected a path starting with '/', got \"cgn\\x01\"\n"
      "cognitora.toml:4:15: key 'state.etcd.lease_ttl_s' expected integer in [2, 3600], got 1");
  EXPECT_EQ(error_of("[state.gossip]\ncluster_id = \"\"\nlisten = \"0.0.0.0\"\n"),
            "cognitora.toml:2:14: key 'state.gossip.cluster_id' expected a non-empty string, got \"\"\n"
            "cognitora.toml:3:10: key 'state.gossip.listen' expected HOST:PORT, got \"0.0.0.0\"");
}

TEST(Config, StaticNodesGetNamesRolesAndUniqueness) {
  auto r = load(R"(
[[router.nodes]]
url = "http://10.0.0.1:9090/"
[[router.nodes]]
url = "https://n2.example"
name = "two"
role = "decode"
models = ["a", "b"]
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->router.nodes.size(), 2u);
  EXPECT_EQ(r->router.nodes[0].name, "10.0.0.1:9090");
  EXPECT_EQ(r->router.nodes[0].role, "both");
  EXPECT_TRUE(r->router.nodes[0].models.empty());
  EXPECT_EQ(r->router.nodes[1].name, "two");
  EXPECT_EQ(r->router.nodes[1].role, "decode");
  EXPECT_EQ(r->router.nodes[1].models, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->router.nodes[0].engine, "vllm");
  EXPECT_EQ(r->router.nodes[1].engine, "vllm");

  EXPECT_EQ(
      error_of(
          "[[router.nodes]]\nurl = \"http://a:1\"\n[[router.nodes]]\nurl = \"http://b:1\"\nname = \"a:1\"\n"),
      "cognitora.toml:5:8: key 'router.nodes[1].name' duplicates node name \"a:1\"; node names must be "
      "unique");
}

TEST(Config, StaticNodesNameTheirEngineForTheMetricsMapping) {
  for (const char* engine : {"vllm", "sglang", "trtllm", "llamacpp", "mlx", "cgn-infer"}) {
    auto r = load(std::string("[[router.nodes]]\nurl = \"http://a:1\"\nengine = \"") + engine + "\"\n");
    ASSERT_TRUE(r.ok()) << engine << ": " << r.error().message;
    EXPECT_EQ(r->router.nodes[0].engine, engine);
    // It survives a dump and a reload.
    auto back = load(dump_config(*r));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->router.nodes[0].engine, engine);
  }
  EXPECT_EQ(error_of("[[router.nodes]]\nurl = \"http://a:1\"\nengine = \"sim\"\n"),
            "cognitora.toml:3:10: key 'router.nodes[0].engine' expected one of "
            "vllm|sglang|trtllm|llamacpp|mlx|cgn-infer, got \"sim\"");
}

TEST(Config, DisaggregationFallbackIsAggregatedOrReject) {
  auto d = load("");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->router.disaggregation.fallback, "aggregated");
  auto r = load("[router.disaggregation]\nfallback = \"reject\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->router.disaggregation.fallback, "reject");
  EXPECT_EQ(
      error_of("[router.disaggregation]\nfallback = \"maybe\"\n"),
      "cognitora.toml:2:12: key 'router.disaggregation.fallback' expected one of aggregated|reject, got "
      "\"maybe\"");
}

TEST(Config, AdmissionCapsPerModelAndRole) {
  auto r = load(R"(
[router.admission]
max_queue = 100
[router.admission.models.small]
max_queue = 10
[router.admission.models."big/model"]
decode_max_queue = 7
prefill_max_queue = 3
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const AdmissionConfig& a = r->router.admission;
  EXPECT_EQ(a.max_queue_for("other", "both"), 100u);
  EXPECT_EQ(a.max_queue_for("small", "both"), 10u);
  EXPECT_EQ(a.max_queue_for("small", "decode"), 10u);
  EXPECT_EQ(a.max_queue_for("big/model", "prefill"), 3u);
  EXPECT_EQ(a.max_queue_for("big/model", "decode"), 7u);
  EXPECT_EQ(a.max_queue_for("big/model", "both"), 100u);
  EXPECT_EQ(error_of("[router.admission.models]\nm = 5\n"),
            "cognitora.toml:2:1: unknown key 'router.admission.models.m'");
}

TEST(Config, TlsCertAndKeyGoTogether) {
  EXPECT_EQ(
      error_of("[router]\ntls_cert = \"c.pem\"\n"),
      "cognitora.toml:2:12: key 'router.tls_cert' is set but 'router.tls_key' is not; give both or neither");
  EXPECT_EQ(
      error_of("[router]\ntls_key = \"k.pem\"\n"),
      "cognitora.toml:2:11: key 'router.tls_key' is set but 'router.tls_cert' is not; give both or neither");
  EXPECT_TRUE(load("[router]\ntls_cert = \"c\"\ntls_key = \"k\"\n").ok());
}

TEST(Config, SecretsComeFromTheEnvironment) {
  auto r = load("[router]\napi_keys_env = \"CGN_T_KEYS\"\n[state.gossip]\nsecret_env = \"CGN_T_GOSSIP\"\n",
                {{"CGN_T_KEYS", " sk-one , sk-two,,"}, {"CGN_T_GOSSIP", "hunter2-gossip"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->router.api_keys_from_env(), (std::vector<std::string>{"sk-one", "sk-two"}));
  EXPECT_EQ(r->router.api_keys.env_name(), "CGN_T_KEYS");
  EXPECT_EQ(r->state.gossip.secret.reveal(), "hunter2-gossip");
  EXPECT_EQ(fmt::format("{}", r->state.gossip.secret), "<redacted>");
  EXPECT_EQ(fmt::format("{}", Secret()), "<unset>");
}

TEST(Config, MissingSecretVariableIsAnErrorNamingIt) {
  auto r = load("[router]\napi_keys_env = \"CGN_T_NOPE\"\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ConfigError::missing_env);
  EXPECT_EQ(r.error().message,
            "cognitora.toml:2:16: key 'router.api_keys_env' names environment variable 'CGN_T_NOPE', which "
            "is not set");
  EXPECT_EQ(
      error_of("[state.gossip]\nsecret_env = \"CGN_T_EMPTY\"\n", {{"CGN_T_EMPTY", ""}}),
      "cognitora.toml:2:14: key 'state.gossip.secret_env' names environment variable 'CGN_T_EMPTY', which is "
      "empty");
  EXPECT_EQ(error_of("[state.gossip]\nsecret_env = \"\"\n"),
            "cognitora.toml:2:14: key 'state.gossip.secret_env' expected the name of an environment "
            "variable, got \"\"");
}

TEST(Config, IntakeCapsAndTheMetricsListenerAndKey) {
  auto r = load(
      "[router.limits]\nmax_connections = 10\nmax_buffered_bytes = 2097152\nreject_log_interval_s = 60\n"
      "[router.metrics]\nlisten = \"127.0.0.1:9100\"\nkey_env = \"CGN_T_METRICS\"\n",
      {{"CGN_T_METRICS", "metrics-key-0123456789"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->router.limits.max_connections, 10u);
  EXPECT_EQ(r->router.limits.max_buffered_bytes, 2097152u);
  EXPECT_EQ(r->router.limits.reject_log_interval_s, 60u);
  EXPECT_EQ(r->router.metrics.listen, "127.0.0.1:9100");
  EXPECT_EQ(r->router.metrics.key.reveal(), "metrics-key-0123456789");
  const std::string dump = dump_config(*r);
  EXPECT_EQ(dump.find("metrics-key-0123456789"), std::string::npos) << dump;
  EXPECT_NE(dump.find("key_env = 'CGN_T_METRICS'"), std::string::npos) << dump;
  EXPECT_EQ(
      error_of("[router.limits]\nmax_connections = 0\n"),
      "cognitora.toml:2:19: key 'router.limits.max_connections' expected integer in [1, 1048576], got 0");
  EXPECT_EQ(error_of("[router.limits]\nmax_buffered_bytes = 1000\n"),
            "cognitora.toml:2:22: key 'router.limits.max_buffered_bytes' expected integer in [1048576, "
            "1099511627776], got 1000");
  EXPECT_EQ(code_of("[router.metrics]\nlisten = \"nowhere\"\n"), ConfigError::bad_value);
  EXPECT_EQ(code_of("[router.metrics]\nkey_env = \"CGN_T_UNSET_METRICS\"\n"), ConfigError::missing_env);
  EXPECT_EQ(code_of("[router.metrics]\nopen = true\n"), ConfigError::unknown_key);
}

TEST(Config, GossipKeyRotationAndInsecureAreCheckedTogether) {
  auto r = load("[state.gossip]\nsecret_env = \"CGN_T_NEW\"\nrotation_secret_env = \"CGN_T_OLD\"\n",
                {{"CGN_T_NEW", "new"}, {"CGN_T_OLD", "old"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->state.gossip.rotation_secret.reveal(), "old");
  EXPECT_EQ(dump_config(*r).find("old\""), std::string::npos);
  EXPECT_NE(dump_config(*r).find("rotation_secret_env = 'CGN_T_OLD'"), std::string::npos) << dump_config(*r);
  EXPECT_EQ(
      error_of("[state.gossip]\nrotation_secret_env = \"CGN_T_OLD\"\n", {{"CGN_T_OLD", "old"}}),
      "cognitora.toml:2:23: key 'state.gossip.rotation_secret_env' is set but 'state.gossip.secret_env' "
      "is not; the rotation key is only accepted beside a signing key");
  EXPECT_EQ(error_of("[state.gossip]\nsecret_env = \"CGN_T_NEW\"\ninsecure = true\n", {{"CGN_T_NEW", "new"}}),
            "cognitora.toml:3:12: key 'state.gossip.insecure' is true but secret_env is set; give one or the "
            "other");
  auto open = load("[state.gossip]\ninsecure = true\n");
  ASSERT_TRUE(open.ok()) << open.error().message;
  EXPECT_TRUE(open->state.gossip.insecure);
  EXPECT_NE(dump_config(*open).find("insecure = true"), std::string::npos);
}

TEST(Config, ClusterTokenComesFromAFileOrTheEnvironmentAndIsNeverPrinted) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("token"),
                           "# rotated 2026-12-01\nnew-token-0123456789\n  old-token-0123456789  \n\n");
  auto f = load("[cluster]\ntoken_file = \"" + dir.file("token") + "\"\n");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->cluster.tokens, (std::vector<std::string>{"new-token-0123456789", "old-token-0123456789"}));
  const std::string dump = dump_config(*f);
  EXPECT_EQ(dump.find("new-token"), std::string::npos) << dump;
  EXPECT_NE(dump.find("token_file"), std::string::npos) << dump;
  auto e = load("[cluster]\ntoken_env = \"CGN_T_CLUSTER\"\n",
                {{"CGN_T_CLUSTER", "env-token-0123456789, env-old-0123456789"}});
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->cluster.tokens, (std::vector<std::string>{"env-token-0123456789", "env-old-0123456789"}));
  EXPECT_EQ(dump_config(*e).find("env-token"), std::string::npos);
  EXPECT_TRUE(load("").value().cluster.tokens.empty());
}

TEST(Config, ClusterTokenErrorsNameTheKey) {
  cgn::testing::TempDir dir;
  EXPECT_EQ(
      error_of("[cluster]\ntoken_file = \"/nonexistent/token\"\n"),
      "cognitora.toml:2:14: key 'cluster.token_file' names \"/nonexistent/token\", which cannot be read");
  cgn::testing::write_file(dir.file("short"), "short\n");
  EXPECT_EQ(error_of("[cluster]\ntoken_file = \"" + dir.file("short") + "\"\n").substr(0, 80),
            std::string("cognitora.toml:2:14: key 'cluster.token_file' token 1 is shorter than 16 characters")
                .substr(0, 80));
  cgn::testing::write_file(dir.file("empty"), "# nothing yet\n");
  EXPECT_NE(error_of("[cluster]\ntoken_file = \"" + dir.file("empty") + "\"\n").find("holds no token"),
            std::string::npos);
  EXPECT_NE(
      error_of("[cluster]\ntoken_file = \"" + dir.file("empty") + "\"\ntoken_env = \"X\"\n", {{"X", "x"}})
          .find("give one or the other"),
      std::string::npos);
}

TEST(Config, TlsBlockNeedsItsFilesTogether) {
  cgn::testing::TempDir dir;
  for (const char* f : {"ca.pem", "cert.pem", "key.pem"}) {
    cgn::testing::write_file(dir.file(f), "-----BEGIN X-----\n");
  }
  auto ok = load("[tls]\nca_file = \"" + dir.file("ca.pem") + "\"\ncert_file = \"" + dir.file("cert.pem") +
                 "\"\nkey_file = \"" + dir.file("key.pem") + "\"\nrequire_client_cert = false\n");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_TRUE(ok->tls.enabled());
  EXPECT_FALSE(ok->tls.require_client_cert);
  EXPECT_FALSE(load("").value().tls.enabled());
  EXPECT_EQ(error_of("[tls]\ncert_file = \"" + dir.file("cert.pem") + "\"\nkey_file = \"" +
                     dir.file("key.pem") + "\"\n"),
            "cognitora.toml:2:13: key 'tls.cert_file' is set but 'tls.ca_file' is not; peers are verified "
            "against it");
  EXPECT_NE(error_of("[tls]\nca_file = \"" + dir.file("ca.pem") + "\"\ncert_file = \"" +
                     dir.file("cert.pem") + "\"\n")
                .find("'tls.cert_file' is set but 'tls.key_file' is not"),
            std::string::npos);
  EXPECT_EQ(error_of("[tls]\nca_file = \"/nonexistent/ca.pem\"\n"),
            "cognitora.toml:2:11: key 'tls.ca_file' names \"/nonexistent/ca.pem\", which cannot be read");
}

TEST(Config, EtcdHttpsNeedsACaAndAuthNeedsBothHalves) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("ca.pem"), "-----BEGIN X-----\n");
  // Probe reproduction: https:// used to pass validation and fail at run time.
  EXPECT_EQ(error_of("[state.etcd]\nendpoints = [\"https://127.0.0.1:2379\"]\n"),
            "cognitora.toml:2:13: key 'state.etcd.endpoints' are https:// but 'state.etcd.ca_file' is not "
            "set (the CA "
            "that signed etcd's certificate)");
  auto ok = load("[state.etcd]\nendpoints = [\"https://127.0.0.1:2379\"]\nca_file = \"" + dir.file("ca.pem") +
                     "\"\nusername = \"cognitora\"\npassword_env = \"CGN_T_ETCD_PW\"\n",
                 {{"CGN_T_ETCD_PW", "pw"}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->state.etcd.username, "cognitora");
  EXPECT_EQ(ok->state.etcd.password.reveal(), "pw");
  EXPECT_EQ(dump_config(*ok).find("'pw'"), std::string::npos);
  EXPECT_NE(dump_config(*ok).find("password_env = 'CGN_T_ETCD_PW'"), std::string::npos) << dump_config(*ok);
  EXPECT_NE(error_of("[state.etcd]\nendpoints = [\"https://a:1\", \"http://b:1\"]\n").find("mixes"),
            std::string::npos);
  EXPECT_NE(error_of("[state.etcd]\nusername = \"u\"\n").find("'state.etcd.password_env' is not"),
            std::string::npos);
  EXPECT_NE(
      error_of("[state.etcd]\nca_file = \"" + dir.file("ca.pem") + "\"\n").find("no endpoint is https://"),
      std::string::npos);
}

TEST(Config, ProcessEnvironmentIsTheDefaultLookup) {
  ::setenv("CGN_T_PROCESS_KEYS", "pk", 1);  // NOLINT(concurrency-mt-unsafe): no other thread runs here
  auto r = load_config_from_string("[router]\napi_keys_env = \"CGN_T_PROCESS_KEYS\"\n", "x.toml");
  ::unsetenv("CGN_T_PROCESS_KEYS");  // NOLINT(concurrency-mt-unsafe)
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->router.api_keys.reveal(), "pk");
}

TEST(Config, DumpNeverContainsSecretsAndLoadsBackTheSame) {
  std::map<std::string, std::string> env{{"CGN_T_KEYS", "sk-very-secret"}, {"CGN_T_G", "gossip-very-secret"}};
  auto r = load(R"(
[router]
api_keys_env = "CGN_T_KEYS"
policy = "session"
[router.admission.models."a b"]
max_queue = 3
[[router.nodes]]
url = "http://n:1"
[state.gossip]
secret_env = "CGN_T_G"
[engine]
gpus = [1]
)",
                env);
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::string dump = dump_config(r.value());
  EXPECT_THAT(dump, Not(HasSubstr("very-secret")));
  EXPECT_THAT(dump, HasSubstr("api_keys_env = 'CGN_T_KEYS'"));
  auto again = load_config_from_string(dump, "dump.toml", testing::map_env(env));
  ASSERT_TRUE(again.ok()) << again.error().message << "\n" << dump;
  EXPECT_EQ(dump_config(again.value()), dump);
  EXPECT_EQ(again->router.api_keys.reveal(), "sk-very-secret");
}

TEST(Config, SyntaxErrorsNamePosition) {
  auto r = load("[router]\nlisten = \"a:1\"\npolicy = \n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ConfigError::syntax);
  EXPECT_EQ(r.error().message,
            "cognitora.toml:3:10: TOML syntax error: Error while parsing key-value pair: expected value, saw "
            "'\\n'");
  auto dup = load("[log]\nlevel = \"info\"\nlevel = \"debug\"\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, ConfigError::syntax);
  EXPECT_EQ(dup.error().message,
            "cognitora.toml:3:9: TOML syntax error: Error while parsing key-value pair: cannot redefine "
            "existing string "
            "'level'");
}

TEST(Config, OversizedInputIsRefusedBeforeParsing) {
  std::string big(kMaxConfigBytes + 1, '#');
  auto r = load(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ConfigError::too_large);
  EXPECT_EQ(r.error().message,
            "cognitora.toml: 1048577 bytes exceeds the 1048576-byte limit for a config file");
}

TEST(Config, FilesAreReadFromDisk) {
  testing::TempDir dir;
  auto missing = load_config(dir.file("nope.toml"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ConfigError::io);
  EXPECT_EQ(missing.error().message,
            dir.file("nope.toml") + ": cannot open config file: No such file or directory");

  auto directory = load_config(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error().code, ConfigError::io);
  EXPECT_EQ(directory.error().message, dir.path() + ": cannot read config file: Is a directory");

  testing::write_file(dir.file("c.toml"), "[router]\nlisten = 1\n");
  auto bad = load_config(dir.file("c.toml"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            dir.file("c.toml") + ":2:10: key 'router.listen' expected string, got integer");

  testing::write_file(dir.file("big.toml"), std::string(kMaxConfigBytes + 10, '\n'));
  auto big = load_config(dir.file("big.toml"));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ConfigError::too_large);
}

}  // namespace
}  // namespace cgn::config
