// A cgn-agent that dies or hangs, end to end: real cgn-router, cgn-agent and cgn-engine-sim
// processes (the simulator behind a wrapper named `vllm`) on loopback. The router lists the agents
// statically and polls them rarely (60 s), so what moves requests off a dead node here is the data
// path itself, as in the first seconds after a crash. Every wait polls with a deadline.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <future>

#include "router/e2e_testing.h"

namespace cgn::router::e2e {
namespace {

using cgn::testing::children_of;

// Gone: no such process, or a zombie (it holds no port and no memory; its reaper is elsewhere).
bool gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) {
    return true;
  }
  const std::string stat = cgn::testing::read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || (paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

// Stopped: every thread of `pid` in the stopped state. kill(SIGSTOP) returns before that: the
// other threads stop only once the thread that takes the signal runs, which on a loaded machine
// can be long enough for them to take a request first.
bool stopped(pid_t pid) {
  std::error_code ec;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const std::string stat = cgn::testing::read_file(task.path().string() + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'T') {
      return false;
    }
    any = true;
  }
  return any;
}

struct AgentNode {
  std::string id;
  std::string config;
  uint16_t port = 0;  // the agent's data path (the router's url)
  uint16_t grpc_port = 0;
  uint16_t engine_port = 0;
  std::unique_ptr<Process> proc;
};

class AgentDeath : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string sim = std::filesystem::absolute(bin_path("cgn-engine-sim")).string();
    ASSERT_EQ(::symlink(sim.c_str(), dir_.file("vllm").c_str()), 0);
  }

  // Starts (or restarts, on the same ports) agent `id`; returns once its engine is ready.
  void start_agent(AgentNode& a, const std::string& agent_extra = "") {
    if (a.config.empty()) {
      a.port = static_cast<uint16_t>(cgn::testing::free_port());
      a.engine_port = static_cast<uint16_t>(cgn::testing::free_port());
      a.config = dir_.file("agent-" + a.id + ".toml");
      cgn::testing::write_file(
          a.config, "[agent]\nnode_id = \"" + a.id + "\"\nlisten = \"127.0.0.1:" + std::to_string(a.port) +
                        "\"\ngrpc_listen = \"127.0.0.1:0\"\nprobe_interval_ms = 50\n"
                        "restart_backoff_initial_ms = 60000\n" +
                        agent_extra +
                        "[engine]\nkind = \"vllm\"\nmodel = \"m\"\nserved_name = \"m\"\nport = " +
                        std::to_string(a.engine_port) + "\nextra_args = [\"--sim-time-scale\", \"0.05\"]\n");
    }
    const std::string pf = dir_.file("agent-" + a.id + ".grpc");
    ::unlink(pf.c_str());
    const char* path = std::getenv("PATH");
    a.proc = std::make_unique<Process>(
        std::vector<std::string>{bin_path("cgn-agent"), "--config", a.config, "--grpc-port-file", pf},
        std::map<std::string, std::string>{
            {"PATH", dir_.path() + ":" + (path != nullptr ? path : "/usr/bin:/bin")}});
    a.grpc_port = static_cast<uint16_t>(cgn::testing::wait_for_port_file(pf, 20s));
    ASSERT_GT(a.grpc_port, 0) << a.proc->log();
    ASSERT_TRUE(wait_until([&] { return get(a.port, "/health").status == 200; }, 30s)) << a.proc->log();
  }

  // The router over a and b, both up; its own health polls are a minute apart.
  void start_router() {
    std::string toml =
        "[router]\nlisten = \"127.0.0.1:0\"\npolicy = \"kv\"\n"
        "[router.timeouts]\nhealth_interval_ms = 60000\nconnect_ms = 1000\nfirst_token_ms = 120000\n"
        "shutdown_grace_ms = 0\n"
        // Polls a minute apart would make every node stale under the default 30 s bound.
        "[router.routing]\nmax_staleness_ms = 0\n";
    for (const AgentNode* a : {&a_, &b_}) {
      toml += "[[router.nodes]]\nname = \"" + a->id +
              "\"\nurl = \"http://127.0.0.1:" + std::to_string(a->port) +
              "\"\nagent = \"127.0.0.1:" + std::to_string(a->grpc_port) + "\"\n";
    }
    cgn::testing::write_file(dir_.file("router.toml"), toml);
    router_ = std::make_unique<Process>(std::vector<std::string>{bin_path("cgn-router"), "--config",
                                                                 dir_.file("router.toml"), "--port-file",
                                                                 dir_.file("router.port"), "--threads", "2"});
    port_ = static_cast<uint16_t>(cgn::testing::wait_for_port_file(dir_.file("router.port"), 20s));
    ASSERT_GT(port_, 0) << router_->log();
    ASSERT_TRUE(wait_until(
        [&] {
          const json h = json::parse(get(port_, "/health").body, nullptr, false);
          return h.is_object() && h["nodes_healthy"] == 2;
        },
        30s))
        << router_->log();
  }

  // Sends `n` requests at once, all sharing `prefix` (so the router ranks its holder first);
  // each must be answered 200 by `expected_node` well before first_token_ms (120 s).
  void all_served_quickly_by(const std::string& prefix, int n, const std::string& expected_node) {
    std::vector<std::future<std::pair<Reply, double>>> replies;
    for (int i = 0; i < n; ++i) {
      replies.push_back(std::async(std::launch::async, [this, &prefix, i] {
        const auto t0 = std::chrono::steady_clock::now();
        Reply r = post(port_, "/v1/chat/completions", chat(prefix + "\nq" + std::to_string(i)));
        return std::make_pair(std::move(r),
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }));
    }
    for (auto& f : replies) {
      const auto [r, seconds] = f.get();
      EXPECT_EQ(r.status, 200u) << r.error << r.body;
      EXPECT_EQ(r.header("X-CGN-Node"), expected_node);
      EXPECT_LT(seconds, 15.0);  // a generous bound: the defect was the whole first_token_ms
    }
  }

  TempDir dir_;
  AgentNode a_{"a"}, b_{"b"};
  std::unique_ptr<Process> router_;
  uint16_t port_ = 0;
};

TEST_F(AgentDeath, AKilledAgentsEngineDiesWithItItsRequestsFailOverAndAReplacementTakesItsPorts) {
  start_agent(a_);
  start_agent(b_);
  start_router();
  const std::string prefix = long_text(2000, 7);
  const Reply warm = post(port_, "/v1/chat/completions", chat(prefix + "\nwarm"));
  ASSERT_EQ(warm.status, 200u) << warm.body;
  AgentNode& victim = warm.header("X-CGN-Node") == "a" ? a_ : b_;
  AgentNode& survivor = &victim == &a_ ? b_ : a_;
  const std::vector<pid_t> engines = children_of(victim.proc->pid());
  ASSERT_FALSE(engines.empty());

  victim.proc->signal(SIGKILL);
  ASSERT_GE(victim.proc->wait(10s), 0);
  // The router still ranks the victim first for this prefix: its requests move on at once.
  all_served_quickly_by(prefix, 6, survivor.id);
  // The engine went with its agent, and with it every port the agent had.
  for (const pid_t engine : engines) {
    EXPECT_TRUE(wait_until([&] { return gone(engine); }, 10s))
        << "engine " << engine << " outlived its agent";
  }
  // A new agent on the same data port (and the same engine port) starts and serves.
  start_agent(victim);
  EXPECT_EQ(post(victim.port, "/v1/chat/completions", chat("hello again")).status, 200u)
      << victim.proc->log();
}

TEST_F(AgentDeath, AHungAgentIsPassedOverWithinContinueMs) {
  start_agent(a_);
  start_agent(b_);
  start_router();
  const std::string prefix = long_text(2000, 8);
  const Reply warm = post(port_, "/v1/chat/completions", chat(prefix + "\nwarm"));
  ASSERT_EQ(warm.status, 200u) << warm.body;
  AgentNode& victim = warm.header("X-CGN-Node") == "a" ? a_ : b_;
  AgentNode& survivor = &victim == &a_ ? b_ : a_;
  // Stopped, the agent's port still accepts connections (the kernel's backlog), but nothing
  // answers: no "100 Continue" within continue_ms (2 s) is a failed connect.
  victim.proc->signal(SIGSTOP);
  ASSERT_TRUE(wait_until([&] { return stopped(victim.proc->pid()); }, 10s));
  all_served_quickly_by(prefix, 3, survivor.id);
  const auto retries =
      sample(get(port_, "/metrics").body, "cgn_router_retries_total{model=\"m\",reason=\"connect\"}");
  ASSERT_TRUE(retries.has_value()) << "no connect retries counted";
  EXPECT_GE(*retries, 1.0);
  victim.proc->signal(SIGCONT);
}

TEST_F(AgentDeath, WithEngineOutlivesAgentTheEngineSurvivesAKilledAgent) {
  start_agent(a_, "engine_outlives_agent = true\n");
  const std::vector<pid_t> engines = children_of(a_.proc->pid());
  ASSERT_FALSE(engines.empty());
  a_.proc->signal(SIGKILL);
  ASSERT_GE(a_.proc->wait(10s), 0);
  // Still serving on its own port, with no agent.
  EXPECT_EQ(get(a_.engine_port, "/health").status, 200u);
  for (const pid_t engine : engines) {
    EXPECT_FALSE(gone(engine));
    ::kill(engine, SIGKILL);  // this test's to clean up: nothing else will
  }
  for (const pid_t engine : engines) {
    EXPECT_TRUE(wait_until([&] { return gone(engine); }, 10s));
  }
}

}  // namespace
}  // namespace cgn::router::e2e
