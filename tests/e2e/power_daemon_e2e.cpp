// cgn-agent reading a running cgn-power daemon (`[[power.sources]] kind = "cgn_power"`), end to
// end: cgn-engine-sim, cgn-power (a static 123.5 W draw), a cgn-agent attached to the simulator and
// reading the daemon over gRPC, and cgn-router with the agent as a static node. The node's watts
// reach the router; with the daemon stopped the router's gauge for the node goes (unknown, never
// 0 W) and the agent logs it once; with the daemon back on the same port the watts return and
// the recovery is logged once. Every wait polls with a deadline.
#include <gtest/gtest.h>

#include <csignal>
#include <optional>

#include "router/etcd_testing.h"
#include "testing/engine_sim.h"
#include "testing/metrics_page.h"
#include "testing/process.h"

namespace cgn {
namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;
using router::etcdtest::http_call;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST(PowerDaemon, agent_reads_a_running_cgn_power_and_leaves_watts_out_while_it_is_down) {
  TempDir dir;
  cgn::testing::EngineSimOptions so;
  cgn::testing::EngineSim sim(so);
  ASSERT_GT(sim.port(), 0) << sim.log();

  const auto daemon_port = static_cast<uint16_t>(cgn::testing::free_port());
  cgn::testing::write_file(dir.file("power.toml"),
                           "[power]\nlisten = \"127.0.0.1:" + std::to_string(daemon_port) +
                               "\"\nmetrics_listen = \"127.0.0.1:0\"\npoll_interval_ms = 50\n"
                               "[[power.sources]]\nname = \"psu\"\nkind = \"static\"\nwatts = 123.5\n");
  auto start_daemon = [&] {
    return std::make_unique<Process>(std::vector<std::string>{cgn::testing::bin_path("cgn-power"), "--config",
                                                              dir.file("power.toml"), "--port-file",
                                                              dir.file("daemon.port")});
  };
  auto daemon = start_daemon();
  // Serving (its port file written) before the agent starts, so the agent's first read succeeds.
  ASSERT_EQ(cgn::testing::wait_for_port_file(dir.file("daemon.port"), 30s), daemon_port) << daemon->log();

  const auto agent_port = static_cast<uint16_t>(cgn::testing::free_port());
  cgn::testing::write_file(
      dir.file("agent.toml"),
      "[agent]\nnode_id = \"n1\"\nlisten = \"127.0.0.1:" + std::to_string(agent_port) +
          "\"\ngrpc_listen = \"127.0.0.1:0\"\nscrape_interval_ms = 100\n[engine]\nkind = \"external\"\n"
          "attach_kind = \"vllm\"\nmodel = \"m\"\nurl = \"" +
          sim.url() +
          "\"\n[power]\npoll_interval_ms = 100\n[[power.sources]]\nname = \"node-daemon\"\n"
          "kind = \"cgn_power\"\ntarget = \"127.0.0.1:" +
          std::to_string(daemon_port) + "\"\ntimeout_ms = 500\n");
  Process agent({cgn::testing::bin_path("cgn-agent"), "--config", dir.file("agent.toml"), "--grpc-port-file",
                 dir.file("agent.grpc")});
  const int grpc = cgn::testing::wait_for_port_file(dir.file("agent.grpc"), 30s);
  ASSERT_GT(grpc, 0) << agent.log();

  cgn::testing::write_file(
      dir.file("router.toml"),
      "[[router.nodes]]\nname = \"n1\"\nurl = \"http://127.0.0.1:" + std::to_string(agent_port) +
          "\"\nagent = \"127.0.0.1:" + std::to_string(grpc) + "\"\n");
  Process router({cgn::testing::bin_path("cgn-router"), "--config", dir.file("router.toml"), "--listen",
                  "127.0.0.1:0", "--port-file", dir.file("router.port")});
  const int rp = cgn::testing::wait_for_port_file(dir.file("router.port"), 30s);
  ASSERT_GT(rp, 0) << router.log();
  const std::string gauge = "cgn_cluster_node_power_watts{node=\"n1\"}";
  auto watts = [&]() -> std::optional<double> {
    const std::string page = http_call(static_cast<uint16_t>(rp), "GET", "/metrics", "").body;
    if (page.find("\n" + gauge + " ") == std::string::npos) {
      return std::nullopt;
    }
    return cgn::testing::metric(page, gauge);
  };
  auto node_up = [&] {
    return http_call(static_cast<uint16_t>(rp), "GET", "/metrics", "")
               .body.find("cgn_cluster_node_up{node=\"n1\"} 1") != std::string::npos;
  };

  // The daemon's 123.5 W reach the router through the agent's record.
  ASSERT_TRUE(wait_until([&] { return watts() == 123.5; }, 60s))
      << router.log() << agent.log() << daemon->log();

  // Down: the node stays in routing, its watts leave (unknown, not 0 W), and the agent says so once.
  EXPECT_EQ(daemon->stop(), 0);
  ASSERT_TRUE(wait_until([&] { return !watts() && node_up(); }, 60s)) << router.log() << agent.log();

  // Back on the same port: the watts return; the failure and the recovery were each logged once.
  daemon = start_daemon();
  ASSERT_TRUE(wait_until([&] { return watts() == 123.5; }, 60s)) << agent.log() << daemon->log();
  const std::string log = agent.log();
  EXPECT_EQ(count(log, "power source failed"), 1u) << log;
  EXPECT_EQ(count(log, "power source reads"), 2u) << log;  // the first read and the recovery
  EXPECT_EQ(router.stop(), 0);
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(15s), 0) << agent.log();
  EXPECT_EQ(daemon->stop(), 0);
}

}  // namespace
}  // namespace cgn
