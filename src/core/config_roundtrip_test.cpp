// --print-config (dump_config) prints TOML that loads back to the same configuration:
// load(dump(load(x))) == load(x), for the defaults, the example file, and files exercising every
// kind of key the router and the agent read (cgn-sim and cgn-bench read no configuration file).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/config.h"
#include "core/config_schema.h"
#include "testing/config_env.h"
#include "testing/process.h"

namespace cgn::config {
namespace {

const std::map<std::string, std::string> kEnv = {
    {"CGN_T_KEYS", "k1,k2"},
    {"CGN_API_KEYS", "k3"},
    {"CGN_T_METRICS", "metrics-key-0123456789"},
    {"CGN_T_GOSSIP", "gossip-secret"},
    {"CGN_T_OLD", "old-secret"},
    {"CGN_T_PW", "pw"},
    {"CGN_T_TOKENS", "0123456789abcdef0123,fedcba9876543210fedc"}};

// Loads `text`, prints it, loads the print and expects the same configuration (and the same print).
void expect_round_trip(const std::string& text) {
  auto first = load_config_from_string(text, "in.toml", testing::map_env(kEnv));
  ASSERT_TRUE(first.ok()) << first.error().message;
  const std::string dump = dump_config(*first);
  auto second = load_config_from_string(dump, "in.toml", testing::map_env(kEnv));
  ASSERT_TRUE(second.ok()) << second.error().message << "\n" << dump;
  EXPECT_TRUE(*second == *first) << "input:\n" << text << "\nprinted:\n" << dump;
  EXPECT_EQ(dump_config(*second), dump);
}

TEST(ConfigRoundTrip, Defaults) {
  expect_round_trip("");
}

TEST(ConfigRoundTrip, ExampleFile) {
  expect_round_trip(testing::read_file(testing::source_path("docs/examples/cognitora.toml")));
}

TEST(ConfigRoundTrip, RouterConfiguration) {
  testing::TempDir dir;
  testing::write_file(dir.file("keys"), "sk-1\n");
  expect_round_trip(fmt::format(R"(state_backend = "etcd"
[router]
listen = "[::1]:9000"
policy = "session"
api_keys_file = "{0}"
api_keys_env = "CGN_T_KEYS"
tls_cert = "{0}"
tls_key = "{0}"
[router.limits]
max_body_bytes = 4096
max_buffered_bytes = 2097152
[router.metrics]
listen = "127.0.0.1:9100"
key_env = "CGN_T_METRICS"
[router.timeouts]
continue_ms = 0
[router.routing]
block_bytes = 128
index_max_entries = 100000
max_staleness_ms = 0
[router.routing.weights]
prefill_ms_per_block = 2.5
queue_ms_per_request = 0.1
inflight_prefill_weight = 0.3333333333333333
uncached_weight = 1
kv_knee = 0.5
temperature = 7.25
[router.routing.load_guard]
spread_ratio = 1.5
[router.admission]
max_queue = 0
[router.admission.models."meta-llama/Llama-3.1-8B"]
prefill_max_queue = 16
[router.admission.models.b]
max_queue = 3
decode_max_queue = 0
[router.disaggregation]
fallback = "reject"
[[router.nodes]]
url = "http://10.0.0.1:9090"
[[router.nodes]]
url = "https://b:1/v1"
name = "b"
role = "decode"
models = ["m1", "m2"]
agent = "b:9091"
engine = "sglang"
[state.etcd]
endpoints = ["http://a:1", "http://b:2"]
username = "u"
password_env = "CGN_T_PW"
prefix = "/x"
[state.gossip]
seeds = ["10.0.0.1:7946"]
secret_env = "CGN_T_GOSSIP"
rotation_secret_env = "CGN_T_OLD"
[cluster]
token_env = "CGN_T_TOKENS"
)",
                                dir.file("keys")));
}

TEST(ConfigRoundTrip, AgentConfiguration) {
  testing::TempDir dir;
  testing::write_file(dir.file("pem"), "not checked beyond being readable\n");
  testing::write_file(dir.file("tokens"), "# rotation\n0123456789abcdef0123\n");
  expect_round_trip(fmt::format(R"([agent]
node_id = "gpu-7"
watt_limit = 350.5
state_backend = "gossip"
grpc_listen = "127.0.0.1:0"
restart_backoff_initial_ms = 10
engine_outlives_agent = true
[engine]
kind = "external"
url = "http://127.0.0.1:8001"
attach_kind = "llamacpp"
extra_args = ["--x", "y z"]
kv_offload = true
gpus = [0, 3]
role = "prefill"
pd_transfer_backend = "mooncake"
nixl_side_channel_host = "10.0.0.2"
nixl_side_channel_port = 5601
kv_events = true
[state.gossip]
insecure = true
[tls]
ca_file = "{0}"
cert_file = "{0}"
key_file = "{0}"
require_client_cert = false
[cluster]
token_file = "{1}"
[state.etcd]
endpoints = ["https://e:2379"]
ca_file = "{0}"
)",
                                dir.file("pem"), dir.file("tokens")));
}

// Every key the declarations list reads back from the print of a default configuration, and
// nothing is printed that is not declared (the print and the reference come from one list).
TEST(ConfigRoundTrip, EveryDeclaredKeyIsDocumented) {
  const auto tables = reference_tables();
  size_t rows = 0;
  for (const auto& t : tables) {
    rows += t.rows.size();
    for (const auto& r : t.rows) {
      EXPECT_FALSE(r.meaning.empty()) << t.path << "." << r.key;
      EXPECT_FALSE(r.type.empty()) << t.path << "." << r.key;
    }
  }
  EXPECT_GT(rows, 100u);
}

// The drift check behind the config_doc_drift test: a changed row, a table without a block and a
// block without a table are all reported; prose outside the blocks is kept.
TEST(ConfigDoc, UpdateReferenceFindsDriftMissingAndStrayBlocks) {
  const std::vector<DocTable> tables = {{"a", {{"k", "integer", "`1`", "", "one"}}},
                                        {"b", {{"j", "string", "`\"x\"`", "", "two"}}}};
  const std::string good_a =
      "<!-- BEGIN cgn-config-doc a -->\n" + render_markdown(tables[0]) + "<!-- END cgn-config-doc -->\n";
  const DocUpdate same = update_reference("intro\n" + good_a, {tables[0]});
  EXPECT_TRUE(same.drifted.empty() && same.missing.empty() && same.stray.empty());
  EXPECT_EQ(same.text, "intro\n" + good_a);

  std::string edited = good_a;
  edited.replace(edited.find("one"), 3, "uno");
  const DocUpdate u = update_reference(
      "intro\n" + edited + "<!-- BEGIN cgn-config-doc gone -->\n<!-- END cgn-config-doc -->\n", tables);
  EXPECT_EQ(u.drifted, std::vector<std::string>{"a"});
  EXPECT_EQ(u.missing, std::vector<std::string>{"b"});
  EXPECT_EQ(u.stray, std::vector<std::string>{"gone"});
  EXPECT_EQ(u.text.find("uno"), std::string::npos);
  EXPECT_EQ(u.text.rfind("intro\n", 0), 0u);
}

}  // namespace
}  // namespace cgn::config
