// End to end: disaggregated prefill/decode through the cgn-router binary and cgn-agent
// processes, each spawning cgn-engine-sim through a wrapper named like the engine (`vllm`) in the
// role its [engine] role says. The router lists the agents statically with `agent = "HOST:PORT"`
// and no role: each node's role comes from its agent's node record (Agent.Health), and the
// agent's vLLM driver puts the NixlConnector --kv-transfer-config on the engine's line. The
// simulators speak vLLM's NixlConnector protocol, so the counters in their /admin/state
// (kv_handoffs_claimed, kv_pulls_ok, held_handoffs, ...) say what really moved. Every wait polls
// with a deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <sstream>

#include "router/e2e_testing.h"

namespace cgn::router::e2e {
namespace {

using cgn::testing::children_of;

const std::string kFast = "0.05";

// One cgn-agent over a simulated vLLM engine in `role`.
struct AgentNode {
  std::string id;
  uint16_t port = 0;         // the agent's data path (the router's url)
  uint16_t grpc_port = 0;    // Agent.Health (the router's `agent`)
  uint16_t engine_port = 0;  // the simulator itself, for its counters
  std::unique_ptr<Process> proc;

  json state() const { return json::parse(get(engine_port, "/admin/state").body, nullptr, false); }
  int busy() const {
    const json s = state();
    return s.is_object() ? s["running"].get<int>() + s["waiting"].get<int>() : -1;
  }
  double finished(std::string_view reason) const {
    return count_or_zero(get(engine_port, "/metrics").body,
                         "vllm:request_success_total{engine=\"0\",finished_reason=\"" + std::string(reason) +
                             "\",model_name=\"m\"}");
  }
  double finished_total() const { return finished("stop") + finished("length") + finished("abort"); }
};

class PdAgents : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string sim = std::filesystem::absolute(bin_path("cgn-engine-sim")).string();
    ASSERT_EQ(::symlink(sim.c_str(), dir_.file("vllm").c_str()), 0);
  }

  // Starts an agent whose engine is `vllm serve m ... <extra>` in `role`; `env` goes to the agent
  // (and so to the engine it spawns).
  AgentNode& agent(const std::string& id, const std::string& role, const std::string& time_scale,
                   std::vector<std::string> extra = {}, std::map<std::string, std::string> env = {}) {
    AgentNode a;
    a.id = id;
    a.port = static_cast<uint16_t>(cgn::testing::free_port());
    a.engine_port = static_cast<uint16_t>(cgn::testing::free_port());
    std::string args = "\"--sim-time-scale\", \"" + time_scale + "\", \"--sim-enable-admin\"";
    for (const auto& e : extra) {
      args += ", \"" + e + "\"";
    }
    const std::string cfg = dir_.file("agent-" + id + ".toml");
    cgn::testing::write_file(
        cfg, "[agent]\nnode_id = \"" + id + "\"\nlisten = \"127.0.0.1:" + std::to_string(a.port) +
                 "\"\ngrpc_listen = \"127.0.0.1:0\"\nscrape_interval_ms = 100\n"
                 "probe_interval_ms = 50\nrestart_backoff_initial_ms = 60000\n"
                 "[engine]\nkind = \"vllm\"\nmodel = \"m\"\nserved_name = \"m\"\n"
                 "role = \"" +
                 role + "\"\nport = " + std::to_string(a.engine_port) + "\nextra_args = [" + args + "]\n");
    const std::string pf = dir_.file("agent-" + id + ".grpc");
    ::unlink(pf.c_str());  // a file from an earlier agent of this name would be read first
    const char* path = std::getenv("PATH");
    env["PATH"] = dir_.path() + ":" + (path != nullptr ? path : "/usr/bin:/bin");
    a.proc = std::make_unique<Process>(
        std::vector<std::string>{bin_path("cgn-agent"), "--config", cfg, "--grpc-port-file", pf}, env);
    a.grpc_port = static_cast<uint16_t>(cgn::testing::wait_for_port_file(pf, 20s));
    EXPECT_GT(a.grpc_port, 0) << a.proc->log();
    agents_.push_back(std::move(a));
    return agents_.back();
  }

  // The router over every agent started so far, no role configured: each comes from the record.
  // Returns once every node is up with the role its agent was given.
  void router(const std::map<std::string, std::string>& roles, const std::string& extra_toml = "") {
    std::string toml =
        "[router]\nlisten = \"127.0.0.1:0\"\npolicy = \"kv\"\n"
        "[router.timeouts]\nhealth_interval_ms = 100\nconnect_ms = 1000\nfirst_token_ms = 30000\n"
        "shutdown_grace_ms = 0\n" +
        extra_toml + "\n";
    for (const auto& a : agents_) {
      toml += "[[router.nodes]]\nname = \"" + a.id +
              "\"\nurl = \"http://127.0.0.1:" + std::to_string(a.port) +
              "\"\nagent = \"127.0.0.1:" + std::to_string(a.grpc_port) + "\"\n";
    }
    cgn::testing::write_file(dir_.file("router.toml"), toml);
    ::unlink(dir_.file("router.port").c_str());
    router_ = std::make_unique<Process>(std::vector<std::string>{bin_path("cgn-router"), "--config",
                                                                 dir_.file("router.toml"), "--port-file",
                                                                 dir_.file("router.port"), "--threads", "2"});
    port_ = static_cast<uint16_t>(cgn::testing::wait_for_port_file(dir_.file("router.port"), 20s));
    ASSERT_GT(port_, 0) << router_->log();
    ASSERT_TRUE(wait_until(
        [&] {
          const std::string m = get(port_, "/metrics").body;
          for (const auto& [id, role] : roles) {
            if (sample(m, "cgn_cluster_node_up{node=\"" + id + "\"}").value_or(0) != 1.0 ||
                m.find("cgn_cluster_node_info{node=\"" + id + "\",model=\"m\",engine=\"vllm\",role=\"" +
                       role + "\"") == std::string::npos) {
              return false;
            }
          }
          return true;
        },
        30s))
        << get(port_, "/metrics").body << router_->log() << agents_.front().proc->log();
  }

  void prefill_node_dies_mid_leg(bool kill_agent, const std::string& retry_reason);

  // NaN when the router does not expose `series` (testing/metrics_page.h).
  double metric(const std::string& series) const {
    return cgn::testing::metric(get(port_, "/metrics").body, series);
  }

  TempDir dir_;
  std::deque<AgentNode> agents_;  // stable references
  std::unique_ptr<Process> router_;
  uint16_t port_ = 0;
};

TEST_F(PdAgents, ARequestFlowsPrefillThenDecodeThroughTheAgentsAndDecodePullsFromTheNamedPrefillNode) {
  AgentNode& p = agent("p", "prefill", kFast);
  AgentNode& d = agent("d", "decode", kFast);
  router({{"p", "prefill"}, {"d", "decode"}});
  // The agents' vLLM driver gave both engines the NixlConnector (the line is in their logs).
  for (auto* a : {&p, &d}) {
    EXPECT_NE(a->proc->log().find(R"(NixlConnector\",\"kv_role\":\"kv_both)"), std::string::npos)
        << a->proc->log();
  }
  for (const bool streamed : {true, false}) {
    const std::string body = chat(long_text(2000, streamed ? 1 : 2), 8, streamed);
    const Reply rep =
        streamed ? stream(port_, "/v1/chat/completions", body) : post(port_, "/v1/chat/completions", body);
    ASSERT_EQ(rep.status, 200u) << rep.body << rep.error;
    EXPECT_EQ(rep.header("X-CGN-Node"), "d");
    EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "p");
    if (streamed) {
      ASSERT_GE(rep.events.size(), 3u);
      EXPECT_EQ(rep.events.back(), "[DONE]");
    } else {
      // The agent relays the engine's headers: the decode engine pulled the prompt's blocks.
      EXPECT_EQ(rep.header("X-Sim-Kv-Pull"), "ok");
      EXPECT_GT(std::atoi(rep.header("X-Sim-Transferred-Tokens").c_str()), 1900);
      EXPECT_EQ(rep.json_body()["usage"]["completion_tokens"], 8);
    }
  }
  // The prefill engine ran two prefill legs (finish "length", blocks held, then claimed), and
  // the decode engine claimed both from it: the params the prefill agent relayed reached the
  // decode agent's engine intact.
  const json ps = p.state(), ds = d.state();
  EXPECT_EQ(ps["kv_handoffs_claimed"], 2);
  EXPECT_EQ(ps["held_handoffs"], 0);
  EXPECT_EQ(p.finished("length"), 2.0);
  EXPECT_EQ(ds["kv_pulls_ok"], 2);
  EXPECT_EQ(ds["kv_pulls_failed"], 0);
  EXPECT_EQ(d.finished("length"), 2.0);
  EXPECT_EQ(metric("cgn_router_pd_legs_total{model=\"m\",leg=\"prefill\",outcome=\"handoff\"}"), 2.0);
  EXPECT_EQ(metric("cgn_router_pd_legs_total{model=\"m\",leg=\"decode\",outcome=\"pull\"}"), 2.0);
  // Each agent saw its own leg and answered it.
  EXPECT_EQ(sample(get(p.port, "/metrics").body, "cgn_agent_requests_total{endpoint=\"chat\",code=\"200\"}"),
            2.0);
  EXPECT_EQ(sample(get(d.port, "/metrics").body, "cgn_agent_requests_total{endpoint=\"chat\",code=\"200\"}"),
            2.0);
}

TEST_F(PdAgents, AStopTokenFirstReturnsNoParamsAndTheDecodeNodeRecomputes) {
  AgentNode& p = agent("p", "prefill", kFast, {"--sim-mode", "echo"});
  AgentNode& d = agent("d", "decode", kFast);
  router({{"p", "prefill"}, {"d", "decode"}});
  // Echo mode with an empty last user message: the prefill leg's first token is a stop token.
  const json body = {{"model", "m"},
                     {"messages", json::array({{{"role", "system"}, {"content", long_text(1000, 3)}},
                                               {{"role", "user"}, {"content", ""}}})},
                     {"max_tokens", 4}};
  const Reply rep = post(port_, "/v1/chat/completions", body.dump());
  ASSERT_EQ(rep.status, 200u) << rep.body;
  EXPECT_EQ(rep.header("X-CGN-Node"), "d");
  EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "p");
  EXPECT_EQ(rep.header("X-Sim-Cached-Tokens"), "0");  // the decode engine computed the prompt
  EXPECT_EQ(rep.header("X-Sim-Kv-Pull"), "");
  EXPECT_EQ(p.state()["held_handoffs"], 0);
  EXPECT_EQ(p.finished("stop"), 1.0);
  EXPECT_EQ(d.state()["kv_pulls_ok"], 0);
  EXPECT_EQ(metric("cgn_router_pd_legs_total{model=\"m\",leg=\"decode\",outcome=\"recompute\"}"), 1.0);
}

TEST_F(PdAgents, AnExpiredHandoffMakesTheDecodeNodeRecompute) {
  // The prefill engine gives its held blocks up after 200 ms (VLLM_NIXL_ABORT_REQUEST_TIMEOUT in
  // its agent's environment); the decode engine holds each request 600 ms first (too slow).
  AgentNode& p = agent("p", "prefill", kFast, {}, {{"VLLM_NIXL_ABORT_REQUEST_TIMEOUT", "0.2"}});
  AgentNode& d = agent("d", "decode", kFast, {"--sim-fault", "slow_start=600ms"});
  router({{"p", "prefill"}, {"d", "decode"}});
  const Reply rep = post(port_, "/v1/chat/completions", chat(long_text(1000, 4), 4));
  ASSERT_EQ(rep.status, 200u) << rep.body;
  EXPECT_EQ(rep.header("X-CGN-Node"), "d");
  EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "p");
  EXPECT_EQ(rep.header("X-Sim-Kv-Pull"), "failed");
  EXPECT_EQ(rep.header("X-Sim-Transferred-Tokens"), "0");
  EXPECT_EQ(rep.json_body()["usage"]["completion_tokens"], 4);
  EXPECT_EQ(p.state()["kv_handoffs_expired"], 1);
  EXPECT_EQ(p.state()["held_handoffs"], 0);
  EXPECT_EQ(d.state()["kv_pulls_failed"], 1);
}

// Six streamed requests whose prefill legs sit in a slow prefill node when `kill` (the engine
// under its agent, or the agent itself) is SIGKILLed: every one is retried on the other prefill
// node, decoded on d and answered in full; `retry_reason` is what the router saw fail.
void PdAgents::prefill_node_dies_mid_leg(bool kill_agent, const std::string& retry_reason) {
  // The victim's engine prefills slowly (time scale 20), so the legs sit in it when it dies.
  AgentNode& victim = agent("victim", "prefill", "20");
  AgentNode& p = agent("p", "prefill", kFast);
  AgentNode& d = agent("d", "decode", kFast);
  router({{"victim", "prefill"}, {"p", "prefill"}, {"d", "decode"}});
  std::vector<std::future<Reply>> inflight;
  for (int i = 0; i < 6; ++i) {
    inflight.push_back(std::async(std::launch::async, [this, i] {
      return stream(port_, "/v1/chat/completions", chat(long_text(2000, 10 + i), 4, true));
    }));
  }
  ASSERT_TRUE(wait_until([&] { return victim.busy() > 0; }, 10s));
  const std::vector<pid_t> engines = children_of(victim.proc->pid());
  ASSERT_FALSE(engines.empty());
  if (kill_agent) {
    victim.proc->signal(SIGKILL);  // the router's connections to the agent close
  }
  for (pid_t c : engines) {
    ::kill(c, SIGKILL);  // the engine (an agent's engine is in its own process group)
  }
  for (auto& f : inflight) {
    const Reply rep = f.get();
    ASSERT_EQ(rep.status, 200u) << rep.error << rep.body;
    EXPECT_EQ(rep.header("X-CGN-Node"), "d");
    EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "p");
    EXPECT_EQ(rep.events.back(), "[DONE]");
  }
  EXPECT_GE(metric("cgn_router_retries_total{model=\"m\",reason=\"" + retry_reason + "\"}"), 1.0);
  EXPECT_EQ(p.state()["kv_handoffs_claimed"], 6);
  EXPECT_EQ(d.state()["kv_pulls_ok"], 6);
}

TEST_F(PdAgents, AKilledPrefillEngineFailsItsLegsAndTheyAreRetriedOnAnotherPrefillNode) {
  // The agent stays and answers its legs 502 marked engine_closed: each is retried once.
  prefill_node_dies_mid_leg(false, "closed");
}

TEST_F(PdAgents, AKilledPrefillAgentsLegsAreRetriedOnAnotherPrefillNode) {
  prefill_node_dies_mid_leg(true, "closed");
}

TEST_F(PdAgents, WithNoPrefillNodeUpTheRequestFallsBackToAggregatedOrGets503) {
  for (const bool reject : {false, true}) {
    SCOPED_TRACE(reject ? "reject" : "aggregated");
    agents_.clear();
    AgentNode& p = agent("p", "prefill", kFast);
    AgentNode& d = agent("d", "decode", kFast);
    router({{"p", "prefill"}, {"d", "decode"}},
           reject ? "[router.disaggregation]\nfallback = \"reject\"\n" : "");
    // The prefill agent goes away: its node leaves routing (Agent.Health fails).
    p.proc->stop();
    ASSERT_TRUE(wait_until([&] { return metric("cgn_cluster_node_up{node=\"p\"}") == 0.0; }, 10s));
    const Reply rep = post(port_, "/v1/chat/completions", chat(long_text(500, 20), 4));
    if (!reject) {
      ASSERT_EQ(rep.status, 200u) << rep.body;
      EXPECT_EQ(rep.header("X-CGN-Node"), "d");
      EXPECT_EQ(rep.header("X-CGN-Prefill-Node"), "");
      EXPECT_EQ(rep.header("X-Sim-Kv-Pull"), "");
      EXPECT_EQ(metric("cgn_router_pd_legs_total{model=\"m\",leg=\"decode\",outcome=\"fallback\"}"), 1.0);
      EXPECT_EQ(d.finished("length"), 1.0);
    } else {
      EXPECT_EQ(rep.status, 503u) << rep.body;
      EXPECT_EQ(rep.json_body()["error"]["code"], "no_prefill_node") << rep.body;
      EXPECT_EQ(d.finished_total(), 0.0);  // nothing reached the decode node
    }
    router_->stop();
  }
}

TEST_F(PdAgents, AClientThatLeavesDuringThePrefillLegCancelsItAndNoDecodeLegIsSent) {
  // A slow prefill (time scale 20: a 6,000-token prompt takes seconds).
  AgentNode& p = agent("p", "prefill", "20");
  AgentNode& d = agent("d", "decode", kFast);
  router({{"p", "prefill"}, {"d", "decode"}});
  {
    RawConn client(port_, "/v1/chat/completions", chat(long_text(6000, 40), 8, true));
    ASSERT_TRUE(wait_until([&] { return p.busy() == 1; }, 10s));
  }  // the client walks away mid-prefill
  // The prefill engine sees the abort (a leg left to finish would end "length" and hold blocks).
  ASSERT_TRUE(wait_until([&] { return p.finished_total() >= 1.0; }, 30s));
  EXPECT_EQ(p.finished("abort"), 1.0);
  EXPECT_EQ(p.finished("length"), 0.0);
  EXPECT_EQ(p.busy(), 0);
  EXPECT_EQ(p.state()["held_handoffs"], 0);
  // No decode leg: the decode engine never saw a request and the router counted none.
  EXPECT_EQ(d.finished_total(), 0.0);
  EXPECT_EQ(d.busy(), 0);
  EXPECT_EQ(count_or_zero(get(port_, "/metrics").body,
                          "cgn_router_pd_legs_total{model=\"m\",leg=\"decode\",outcome=\"pull\"}"),
            0.0);
  EXPECT_EQ(metric("cgn_router_pd_legs_total{model=\"m\",leg=\"prefill\",outcome=\"cancelled\"}"), 1.0);
  EXPECT_TRUE(wait_until(
      [&] { return metric("cgn_router_requests_total{model=\"m\",endpoint=\"chat\",code=\"499\"}") == 1.0; },
      5s));
}

}  // namespace
}  // namespace cgn::router::e2e
