// The power term end to end: a real etcd, cgn-router (state_backend "etcd") and two cgn-agents, each
// spawning cgn-engine-sim and reading its power through the dcgm_exporter source from the
// simulator's /dcgm/metrics page. Under steady load, one node's [agent] watt_limit is lowered below
// its draw and the agent reloaded (SIGHUP); the test measures the time until that node's share of
// requests falls below half of what it was, five times, and reports the median. Every wait polls
// with a deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "router/etcd_testing.h"
#include "testing/etcd_server.h"
#include "testing/process.h"

namespace cgn {
namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;
using router::etcdtest::chat_body;
using router::etcdtest::http_call;

constexpr int kPublishMs = 250;
constexpr size_t kWindow = 20;    // the share is measured over the last kWindow answers
constexpr double kCapWatts = 30;  // below the simulator's idle draw (75 W): the node is always over it

class PowerRouting : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.start()) << etcd_.log();
    ASSERT_EQ(::symlink(cgn::testing::bin_path("cgn-engine-sim").c_str(), dir_.file("vllm").c_str()), 0);
    for (const char* id : {"a", "b"}) {
      engine_ports_.push_back(static_cast<uint16_t>(cgn::testing::free_port()));
      write_agent_config(id, 0);
      const char* path = std::getenv("PATH");
      agents_.push_back(std::make_unique<Process>(
          std::vector<std::string>{cgn::testing::bin_path("cgn-agent"), "--config", config_path(id)},
          std::map<std::string, std::string>{
              {"PATH", dir_.path() + ":" + (path != nullptr ? path : "/usr/bin:/bin")}}));
    }
    const std::string pf = dir_.file("router.port");
    router_ = std::make_unique<Process>(
        std::vector<std::string>{cgn::testing::bin_path("cgn-router"), "--listen", "127.0.0.1:0", "--etcd",
                                 "http://" + etcd_.endpoint(), "--port-file", pf, "--threads", "2"});
    const int p = cgn::testing::wait_for_port_file(pf, 20s);
    ASSERT_GT(p, 0) << router_->log();
    port_ = static_cast<uint16_t>(p);
    ASSERT_TRUE(wait_until([&] { return powered_nodes() == 2; }, 60s))
        << http_call(port_, "GET", "/metrics", "").body << agents_[0]->log();
    // A node's record (and its power) can reach the router before the node is healthy; the
    // baseline share is only meaningful once both take traffic.
    ASSERT_TRUE(wait_until(
        [&] {
          return http_call(port_, "GET", "/health", "").body.find("\"nodes_healthy\":2") != std::string::npos;
        },
        60s))
        << http_call(port_, "GET", "/health", "").body;
  }

  void TearDown() override {
    stop_ = true;
    for (auto& t : clients_) {
      t.join();
    }
  }

  std::string config_path(const std::string& id) { return dir_.file("agent-" + id + ".toml"); }

  void write_agent_config(const std::string& id, double watt_limit) {
    const uint16_t engine_port = engine_ports_[id == "a" ? 0 : 1];
    cgn::testing::write_file(
        config_path(id),
        "[agent]\nnode_id = \"" + id + "\"\nlisten = \"127.0.0.1:" + std::to_string(agent_port(id)) +
            "\"\ngrpc_listen = \"127.0.0.1:0\"\nstate_backend = \"etcd\"\npublish_interval_ms = " +
            std::to_string(kPublishMs) +
            "\nscrape_interval_ms = 100\nwatt_limit = " + std::to_string(watt_limit) +
            "\n[engine]\nkind = \"vllm\"\nmodel = \"m\"\nserved_name = \"m\"\nport = " +
            std::to_string(engine_port) +
            "\nextra_args = [\"--sim-time-scale\", \"0.05\"]\n[state.etcd]\nendpoints = " + "[\"http://" +
            etcd_.endpoint() + "\"]\n[power]\npoll_interval_ms = 100\n[[power.sources]]\n" +
            "kind = \"dcgm_exporter\"\nurl = \"http://127.0.0.1:" + std::to_string(engine_port) +
            "/dcgm/metrics\"\n");
  }

  uint16_t agent_port(const std::string& id) {
    auto& p = agent_ports_[id];
    if (p == 0) {
      p = static_cast<uint16_t>(cgn::testing::free_port());
    }
    return p;
  }

  // Nodes with a cgn_cluster_node_power_watts series on the router.
  int powered_nodes() {
    const std::string m = http_call(port_, "GET", "/metrics", "").body;
    int n = 0;
    for (size_t pos = 0; (pos = m.find("\ncgn_cluster_node_power_watts{", pos)) != std::string::npos; ++pos) {
      ++n;
    }
    return n;
  }

  void start_load(int clients) {
    for (int c = 0; c < clients; ++c) {
      clients_.emplace_back([this, c] {
        for (uint64_t i = 0; !stop_; ++i) {
          auto r = http_call(port_, "POST", "/v1/chat/completions",
                             chat_body("m", "steady load " + std::to_string(c) + "-" + std::to_string(i), 8));
          if (r.status == 200) {
            std::lock_guard lock(mu_);
            answers_.push_back(r.node);
            if (answers_.size() > kWindow) {
              answers_.pop_front();
            }
            ++total_;
          }
        }
      });
    }
  }

  // Node `id`'s share of the last kWindow answers, once that many arrived after `after` answers.
  std::optional<double> share(const std::string& id, uint64_t after) {
    std::lock_guard lock(mu_);
    if (total_ < after + kWindow) {
      return std::nullopt;
    }
    return static_cast<double>(std::count(answers_.begin(), answers_.end(), id)) / kWindow;
  }
  uint64_t total() {
    std::lock_guard lock(mu_);
    return total_;
  }

  TempDir dir_;
  cgn::testing::EtcdServer etcd_;
  std::vector<uint16_t> engine_ports_;
  std::map<std::string, uint16_t> agent_ports_;
  std::vector<std::unique_ptr<Process>> agents_;
  std::unique_ptr<Process> router_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> clients_;
  std::mutex mu_;
  std::deque<std::string> answers_;  // guarded by mu_
  uint64_t total_ = 0;               // guarded by mu_
};

TEST_F(PowerRouting, LoweringAWattLimitMovesTrafficOffTheNode) {
  start_load(4);
  std::vector<double> seconds;
  for (int trial = 0; trial < 5; ++trial) {
    // Baseline: node a's share with no limit, once it takes a fair part of the traffic again
    // after the previous trial (one window of answers can be lopsided by chance).
    std::optional<double> base;
    const uint64_t from = total();
    ASSERT_TRUE(wait_until(
        [&] {
          base = share("a", from);
          return base.has_value() && *base > 0.2;
        },
        60s))
        << "node a takes no traffic before the limit: share "
        << (base ? std::to_string(*base) : std::string("not measured"));
    write_agent_config("a", kCapWatts);
    const auto t0 = std::chrono::steady_clock::now();
    agents_[0]->signal(SIGHUP);
    const uint64_t at = total();
    ASSERT_TRUE(wait_until(
        [&] {
          auto s = share("a", at);
          return s && *s < *base / 2;
        },
        60s))
        << agents_[0]->log();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds.push_back(s);
    std::printf("trial %d: baseline share %.2f, below half after %.2f s\n", trial + 1, *base, s);
    // Lift the limit and wait until node a takes traffic again.
    write_agent_config("a", 0);
    agents_[0]->signal(SIGHUP);
    const uint64_t back = total();
    ASSERT_TRUE(wait_until(
        [&] {
          auto sh = share("a", back);
          return sh && *sh >= *base / 2;
        },
        60s));
  }
  std::sort(seconds.begin(), seconds.end());
  const double p50 = seconds[seconds.size() / 2];
  std::printf("time for node a's share to fall below half: p50 %.2f s (min %.2f, max %.2f) over %zu trials\n",
              p50, seconds.front(), seconds.back(), seconds.size());
  RecordProperty("p50_seconds", std::to_string(p50));
  EXPECT_LT(p50, 30.0);  // a generous outer bound: publish 250 ms + watch + kWindow answers
}

}  // namespace
}  // namespace cgn
