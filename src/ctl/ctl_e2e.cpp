// cgn-ctl against a real cluster: etcd, the cgn-router binary (state_backend = "etcd", an admin
// key), two cgn-agent processes each running cgn-engine-sim. Every verb, --json parsed, the
// explain-equals-served check, a drain with requests in flight, and the errors when etcd, the
// router or a recipe is missing. Every wait polls with a deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <set>
#include <sstream>

#include "ctl/ctl_app.h"
#include "ctl/ctl_context.h"
#include "router/etcd_testing.h"
#include "state/etcd/etcd_client.h"
#include "testing/etcd_server.h"
#include "testing/metrics_page.h"
#include "testing/process.h"

namespace cgn::ctl {
namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;
using nlohmann::json;
using router::etcdtest::body_digests;
using router::etcdtest::chat_body;
using router::etcdtest::http_call;
using router::etcdtest::long_prompt;

constexpr const char* kAdminKey = "ctl-test-admin-key-0123456789";

struct CtlRun {
  int rc = -1;
  std::string out;
  std::string err;
  json j() const { return json::parse(out, nullptr, false); }
};

class CtlCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { env_ = new Env(); }
  static void TearDownTestSuite() {
    delete env_;
    env_ = nullptr;
  }

  struct Env {
    TempDir dir;
    cgn::testing::EtcdServer etcd;
    std::vector<std::unique_ptr<Process>> agents;
    std::vector<uint16_t> agent_ports;
    std::unique_ptr<Process> router;
    uint16_t port = 0;
    std::string config;  // cognitora.toml for cgn-ctl and the router

    Env() {
      EXPECT_TRUE(etcd.start()) << etcd.log();
      EXPECT_EQ(::symlink(cgn::testing::bin_path("cgn-engine-sim").c_str(), dir.file("vllm").c_str()), 0);
      config = dir.file("cognitora.toml");
      cgn::testing::write_file(config,
                               "state_backend = \"etcd\"\n[router]\nlisten = \"127.0.0.1:0\"\n"
                               "policy = \"kv\"\n[router.routing.weights]\ntemperature = 0.0\n"
                               "[router.admin]\nkey_env = \"CGN_TEST_ADMIN_KEY\"\n"
                               "[state.etcd]\nendpoints = [\"http://" +
                                   etcd.endpoint() + "\"]\n");
      for (const std::string id : {"a", "b"}) {
        start_agent(id);
      }
      const std::string pf = dir.file("router.port");
      router =
          std::make_unique<Process>(std::vector<std::string>{cgn::testing::bin_path("cgn-router"), "--config",
                                                             config, "--port-file", pf, "--threads", "2"},
                                    std::map<std::string, std::string>{{"CGN_TEST_ADMIN_KEY", kAdminKey}});
      port = static_cast<uint16_t>(cgn::testing::wait_for_port_file(pf, *router, 20s));
      EXPECT_GT(port, 0) << router->describe() << "\n" << router->log();
      EXPECT_TRUE(wait_until(
          [&] {
            auto h = json::parse(http_call(port, "GET", "/health", "").body, nullptr, false);
            return h.is_object() && h["nodes_healthy"] == 2;
          },
          40s))
          << router->log() << agents[0]->log();
    }

    void start_agent(const std::string& id) {
      const uint16_t p = static_cast<uint16_t>(cgn::testing::free_port());
      agent_ports.push_back(p);
      const std::string cfg = dir.file("agent-" + id + ".toml");
      cgn::testing::write_file(
          cfg, "[agent]\nnode_id = \"" + id + "\"\nlisten = \"127.0.0.1:" + std::to_string(p) +
                   "\"\ngrpc_listen = \"127.0.0.1:0\"\nstate_backend = \"etcd\"\npublish_interval_ms = 250\n"
                   "[engine]\nkind = \"vllm\"\nmodel = \"m\"\nserved_name = \"m\"\nport = " +
                   std::to_string(cgn::testing::free_port()) +
                   "\nextra_args = [\"--sim-time-scale\", \"0.05\"]\n[state.etcd]\nendpoints = [\"http://" +
                   etcd.endpoint() + "\"]\nlease_ttl_s = 3\n");
      const char* path = std::getenv("PATH");
      agents.push_back(std::make_unique<Process>(
          std::vector<std::string>{cgn::testing::bin_path("cgn-agent"), "--config", cfg},
          std::map<std::string, std::string>{
              {"PATH", dir.path() + ":" + (path != nullptr ? path : "/usr/bin:/bin")}}));
    }
  };

  static CtlRun ctl(std::vector<std::string> args, const std::string& config = "") {
    std::vector<std::string> full = {"cgn-ctl",
                                     "--config",
                                     config.empty() ? env_->config : config,
                                     "--router",
                                     "http://127.0.0.1:" + std::to_string(env_->port),
                                     "--admin-key-env",
                                     "CGN_TEST_ADMIN_KEY"};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<const char*> argv;
    for (const auto& s : full) {
      argv.push_back(s.c_str());
    }
    ::setenv("CGN_TEST_ADMIN_KEY", kAdminKey, 1);
    std::ostringstream out;
    std::ostringstream err;
    CtlRun r;
    r.rc = run_ctl(static_cast<int>(argv.size()), argv.data(), out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  static router::etcdtest::HttpReply chat(const std::string& body) {
    return http_call(env_->port, "POST", "/v1/chat/completions", body, 60s);
  }

  static Env* env_;
};

CtlCluster::Env* CtlCluster::env_ = nullptr;

TEST_F(CtlCluster, VersionFromTheBinary) {
  Process p({cgn::testing::bin_path("cgn-ctl"), "--json", "version"});
  ASSERT_EQ(p.wait(10s), 0) << p.log();
  const auto j = json::parse(p.log().substr(p.log().find('{')), nullptr, false);
  ASSERT_TRUE(j.is_object()) << p.log();
  EXPECT_FALSE(j["version"].get<std::string>().empty());
}

TEST_F(CtlCluster, NodesAndStatus) {
  auto n = ctl({"--json", "nodes"});
  ASSERT_EQ(n.rc, 0) << n.err;
  const json nodes = n.j();
  ASSERT_TRUE(nodes.is_array()) << n.out;
  ASSERT_EQ(nodes.size(), 2u) << n.out;
  for (const auto& row : nodes) {
    EXPECT_EQ(row["engine"], "vllm");
    EXPECT_EQ(row["models"], "m");
    EXPECT_EQ(row["cordoned"], false);
    EXPECT_GE(row["heartbeat_age_s"].get<int>(), 0);
  }
  auto human = ctl({"nodes"});
  ASSERT_EQ(human.rc, 0);
  EXPECT_NE(human.out.find("KV_EPOCH"), std::string::npos) << human.out;

  ASSERT_EQ(chat(chat_body("m", "status warm-up")).status, 200u);
  auto s = ctl({"--json", "status", "--interval-ms", "200"});
  ASSERT_EQ(s.rc, 0) << s.err;
  const json st = s.j();
  EXPECT_EQ(st["nodes"], 2);
  EXPECT_EQ(st["nodes_up"], 2);
  EXPECT_EQ(st["models"], json::array({"m"}));
  EXPECT_GE(st["requests_total"].get<double>(), 1);
  EXPECT_EQ(st["state_backend"], "etcd");
}

// The admin endpoint runs the router's own decision as a dry run: the node it names is the node
// the same request then goes to (temperature 0, no traffic in between).
TEST_F(CtlCluster, ExplainEqualsServed) {
  std::set<std::string> chosen_nodes;
  for (int i = 0; i < 6; ++i) {
    const std::string prompt = long_prompt("explain" + std::to_string(i));
    const std::string body = chat_body("m", prompt);
    cgn::testing::write_file(env_->dir.file("req.json"), body);
    for (int round = 0; round < 2; ++round) {
      auto e = ctl({"--json", "routes", "explain", "--file", env_->dir.file("req.json")});
      ASSERT_EQ(e.rc, 0) << e.err << e.out;
      const json j = e.j();
      ASSERT_TRUE(j.is_object()) << e.out;
      EXPECT_EQ(j["policy"], "kv");
      EXPECT_EQ(j["request_blocks"], body_digests(body).size());
      ASSERT_EQ(j["nodes"].size(), 2u);
      const std::string chosen = j["chosen"];
      auto r = chat(body);
      ASSERT_EQ(r.status, 200u) << r.body;
      EXPECT_EQ(r.node, chosen) << e.out;
      chosen_nodes.insert(chosen);
      if (round == 1) {
        // The second time, the serving node holds the whole prompt (the router's own entry).
        for (const auto& n : j["nodes"]) {
          if (n["node"] == chosen) {
            EXPECT_EQ(n["overlap"]["blocks"], j["request_blocks"]) << e.out;
          }
        }
      }
    }
  }
  auto human = ctl({"routes", "explain", "--model", "m", "--prompt", "hello there"});
  ASSERT_EQ(human.rc, 0) << human.err;
  EXPECT_NE(human.out.find("chosen: "), std::string::npos) << human.out;
}

// The same for a Responses body: its digests are those of the equivalent chat request, the node
// named is the node /v1/responses then serves it on, and a follow-up is explained as pinned to the
// node holding its previous response, where it is served.
TEST_F(CtlCluster, ExplainEqualsServedForResponses) {
  const std::string prompt = long_prompt("responses-explain");
  const std::string body = json{{"model", "m"}, {"input", prompt}, {"max_output_tokens", 4}}.dump();
  cgn::testing::write_file(env_->dir.file("resp.json"), body);
  auto e =
      ctl({"--json", "routes", "explain", "--endpoint", "responses", "--file", env_->dir.file("resp.json")});
  ASSERT_EQ(e.rc, 0) << e.err << e.out;
  const json j = e.j();
  ASSERT_TRUE(j.is_object()) << e.out;
  EXPECT_EQ(j["endpoint"], "responses");
  EXPECT_EQ(j["request_blocks"], body_digests(chat_body("m", prompt)).size());
  cgn::testing::write_file(env_->dir.file("chat.json"), chat_body("m", prompt));
  auto c = ctl({"--json", "routes", "explain", "--file", env_->dir.file("chat.json")});
  ASSERT_EQ(c.rc, 0) << c.err << c.out;
  EXPECT_EQ(j["digests"], c.j()["digests"]) << "a Responses body and its chat request share digests";
  EXPECT_EQ(j["chosen"], c.j()["chosen"]);

  auto r = http_call(env_->port, "POST", "/v1/responses", body, 60s);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.node, j["chosen"]) << e.out;
  const std::string id = json::parse(r.body)["id"];

  const std::string follow = json{
      {"model", "m"},
      {"input", "and then?"},
      {"previous_response_id", id},
      {"max_output_tokens", 4}}.dump();
  cgn::testing::write_file(env_->dir.file("follow.json"), follow);
  auto f = ctl(
      {"--json", "routes", "explain", "--endpoint", "responses", "--file", env_->dir.file("follow.json")});
  ASSERT_EQ(f.rc, 0) << f.err << f.out;
  EXPECT_EQ(f.j()["previous_response_node"], r.node) << f.out;
  EXPECT_EQ(f.j()["chosen"], r.node) << f.out;
  auto r2 = http_call(env_->port, "POST", "/v1/responses", follow, 60s);
  ASSERT_EQ(r2.status, 200u) << r2.body;
  EXPECT_EQ(r2.node, r.node);
  EXPECT_GT(json::parse(r2.body)["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 0) << r2.body;

  auto bad =
      ctl({"--json", "routes", "explain", "--endpoint", "responses", "--file", env_->dir.file("chat.json")});
  EXPECT_NE(bad.rc, 0) << "a chat body is not a Responses body: " << bad.out;
}

TEST_F(CtlCluster, ExplainNeedsTheAdminKey) {
  auto r = http_call(env_->port, "POST", "/admin/v1/routes/explain", chat_body("m", "x"));
  EXPECT_EQ(r.status, 401u) << r.body;
  ::setenv("CGN_WRONG_KEY", "not-the-admin-key-at-all", 1);
  std::vector<std::string> args = {"cgn-ctl",
                                   "--router",
                                   "http://127.0.0.1:" + std::to_string(env_->port),
                                   "--admin-key-env",
                                   "CGN_WRONG_KEY",
                                   "routes",
                                   "explain",
                                   "--model",
                                   "m",
                                   "--prompt",
                                   "x"};
  std::vector<const char*> argv;
  for (const auto& s : args) {
    argv.push_back(s.c_str());
  }
  std::ostringstream out, err;
  EXPECT_EQ(run_ctl(static_cast<int>(argv.size()), argv.data(), out, err), kFailed);
  EXPECT_NE(err.str().find("401"), std::string::npos) << err.str();
}

TEST_F(CtlCluster, PolicySetIsValidatedWrittenAndApplied) {
  auto bad = ctl({"policy", "set", "no_such_policy"});
  EXPECT_EQ(bad.rc, kFailed);
  EXPECT_NE(bad.err.find("nothing written"), std::string::npos) << bad.err;
  auto badkey = ctl({"policy", "set", "kv", "--set", "no_such_key=1"});
  EXPECT_EQ(badkey.rc, kFailed) << badkey.err;
  auto absent = ctl({"--json", "policy", "get"});
  ASSERT_EQ(absent.rc, 0) << absent.err;
  EXPECT_EQ(absent.j()["set"], false) << absent.out;

  auto set = ctl({"--json", "policy", "set", "round_robin", "--set", "weights.queue_ms_per_request=50"});
  ASSERT_EQ(set.rc, 0) << set.err;
  EXPECT_EQ(set.j()["written"], true);
  auto got = ctl({"--json", "policy", "get"});
  ASSERT_EQ(got.rc, 0) << got.err;
  EXPECT_EQ(got.j()["policy"], "round_robin") << got.out;
  // The router applies it from etcd: its explain names the new policy.
  EXPECT_TRUE(wait_until(
      [&] {
        return ctl({"--json", "routes", "explain", "--model", "m", "--prompt", "p"}).j()["policy"] ==
               "round_robin";
      },
      10s));
  ASSERT_EQ(ctl({"policy", "set", "kv", "--set", "weights.temperature=0.0"}).rc, 0);
  EXPECT_TRUE(wait_until(
      [&] {
        return ctl({"--json", "routes", "explain", "--model", "m", "--prompt", "p"}).j()["policy"] == "kv";
      },
      10s));
}

// Requests in flight on a node when it is drained all finish; drain returns when the agent counts
// none, and nothing new reaches the node.
TEST_F(CtlCluster, DrainWaitsForInFlightRequestsAndDropsNone) {
  // Long answers, sent at once; with two nodes some land on each.
  std::vector<std::future<router::etcdtest::HttpReply>> inflight;
  for (int i = 0; i < 8; ++i) {
    const std::string body =
        R"({"model":"m","max_tokens":3000,"ignore_eos":true,"messages":[{"role":"user","content":"drain )" +
        std::to_string(i) + R"("}]})";
    inflight.push_back(std::async(std::launch::async, [body] { return chat(body); }));
  }
  auto agent_inflight = [](uint16_t port) {
    const auto m = http_call(port, "GET", "/metrics", "").body;
    return cgn::testing::metric(m, "cgn_agent_requests_in_flight");
  };
  std::string target;
  ASSERT_TRUE(wait_until(
      [&] {
        for (size_t i = 0; i < env_->agent_ports.size(); ++i) {
          if (agent_inflight(env_->agent_ports[i]) > 0) {
            target = i == 0 ? "a" : "b";
            return true;
          }
        }
        return false;
      },
      20s));
  auto d = ctl({"drain", target, "--timeout-s", "120"});
  EXPECT_EQ(d.rc, 0) << d.err << d.out;
  EXPECT_NE(d.out.find("in flight"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("drained"), std::string::npos) << d.out;
  EXPECT_EQ(agent_inflight(env_->agent_ports[target == "a" ? 0 : 1]), 0);
  for (auto& f : inflight) {
    auto r = f.get();
    EXPECT_EQ(r.status, 200u) << r.body;
  }
  // Cordoned: new requests go to the other node.
  auto nodes = ctl({"--json", "nodes"}).j();
  for (const auto& n : nodes) {
    EXPECT_EQ(n["cordoned"], n["id"] == target) << nodes.dump();
  }
  ASSERT_TRUE(wait_until([&] { return chat(chat_body("m", "after drain")).node != target; }, 10s));
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(chat(chat_body("m", "after drain " + std::to_string(i))).node, target);
  }
  ASSERT_EQ(ctl({"uncordon", target}).rc, 0);
  EXPECT_EQ(ctl({"cordon", "no-such-node"}).rc, kNotFound);
}

TEST_F(CtlCluster, ErrorsWhenEtcdOrTheRouterIsUnreachable) {
  TempDir d;
  cgn::testing::write_file(d.file("down.toml"),
                           "state_backend = \"etcd\"\n[state.etcd]\nendpoints = [\"http://127.0.0.1:" +
                               std::to_string(cgn::testing::free_port()) + "\"]\n");
  auto n = ctl({"--timeout-ms", "500", "nodes"}, d.file("down.toml"));
  EXPECT_EQ(n.rc, kNoEtcd);
  EXPECT_NE(n.err.find("cannot reach etcd"), std::string::npos) << n.err;
  auto p = ctl({"--timeout-ms", "500", "policy", "set", "kv"}, d.file("down.toml"));
  EXPECT_EQ(p.rc, kNoEtcd) << p.err;

  for (const char* backend : {"static", "gossip"}) {
    cgn::testing::write_file(
        d.file(std::string(backend) + ".toml"),
        std::string("state_backend = \"") + backend + "\"\n" +
            (std::string(backend) == "gossip" ? "[state.gossip]\ninsecure = true\n" : ""));
    for (const char* verb : {"cordon", "uncordon", "drain"}) {
      auto r = ctl({verb, "a"}, d.file(std::string(backend) + ".toml"));
      EXPECT_EQ(r.rc, kNeedsEtcd) << backend << " " << verb << ": " << r.err;
      EXPECT_NE(r.err.find("needs etcd"), std::string::npos) << r.err;
    }
  }

  std::vector<std::string> args = {
      "cgn-ctl",      "--router", "http://127.0.0.1:" + std::to_string(cgn::testing::free_port()),
      "--timeout-ms", "500",      "status"};
  std::vector<const char*> argv;
  for (const auto& s : args) {
    argv.push_back(s.c_str());
  }
  std::ostringstream out, err;
  EXPECT_EQ(run_ctl(static_cast<int>(argv.size()), argv.data(), out, err), kNoRouter);
  EXPECT_NE(err.str().find("cannot reach"), std::string::npos) << err.str();
  std::vector<const char*> bad = {"cgn-ctl", "no-such-verb"};
  EXPECT_EQ(run_ctl(2, bad.data(), out, err), kUsage);
}

TEST_F(CtlCluster, BenchDrivesTheLoadGenerator) {
  auto b = ctl({"bench", "--", "--workload", "small", "--limit", "4", "--model", "m", "--rate", "20"});
  EXPECT_EQ(b.rc, 0) << b.err << b.out;
}

TEST_F(CtlCluster, UpAndDownRunRecipes) {
  TempDir d;
  std::filesystem::create_directories(d.file("recipes/demo"));
  cgn::testing::write_file(d.file("recipes/demo/up.sh"), "echo up > " + d.file("up.out") + "\n");
  auto up = ctl({"up", "demo", "--recipes", d.file("recipes")});
  EXPECT_EQ(up.rc, 0) << up.err;
  EXPECT_EQ(cgn::testing::read_file(d.file("up.out")), "up\n");
  auto down = ctl({"down", "demo", "--recipes", d.file("recipes")});
  EXPECT_EQ(down.rc, kNotFound) << down.err;
  EXPECT_NE(down.err.find("down.sh"), std::string::npos) << down.err;
  EXPECT_EQ(ctl({"up", "missing", "--recipes", d.file("recipes")}).rc, kNotFound);
  EXPECT_EQ(ctl({"up", "../etc", "--recipes", d.file("recipes")}).rc, kUsage);
  EXPECT_EQ(ctl({"up", "m/../../etc", "--recipes", d.file("recipes")}).rc, kUsage);
  EXPECT_EQ(ctl({"up", "/etc", "--recipes", d.file("recipes")}).rc, kUsage);
  // MODEL/ENGINE/TOPOLOGY, run with bash (the recipes' scripts are bash).
  std::filesystem::create_directories(d.file("recipes/m-1.5/vllm/agg"));
  cgn::testing::write_file(d.file("recipes/m-1.5/vllm/agg/up.sh"),
                           "a=(x y); echo \"${a[1]}\" > " + d.file("nested.out") + "\n");
  auto nested = ctl({"up", "m-1.5/vllm/agg", "--recipes", d.file("recipes")});
  EXPECT_EQ(nested.rc, 0) << nested.err;
  EXPECT_EQ(cgn::testing::read_file(d.file("nested.out")), "y\n");
}

}  // namespace
}  // namespace cgn::ctl
