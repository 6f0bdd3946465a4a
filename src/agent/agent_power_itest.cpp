// cgn-agent with an in-process power reader: the simulator's dcgm-exporter page read through the
// real dcgm_exporter source, the figures published to a real etcd, and watt_limit reloaded on SIGHUP.
#include <gtest/gtest.h>

#include <csignal>

#include "agent/agent_itest_util.h"
#include "cluster/node_record.h"
#include "state/etcd/itest_util.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using namespace itest;

std::string agent_config(uint16_t port, uint16_t sim_port, const std::string& etcd, const std::string& prefix,
                         double watt_limit) {
  return "[agent]\nnode_id = \"power-1\"\nlisten = \"127.0.0.1:" + std::to_string(port) +
         "\"\ngrpc_listen = \"127.0.0.1:0\"\nstate_backend = \"etcd\"\npublish_interval_ms = 50\n"
         "scrape_interval_ms = 100\nwatt_limit = " +
         std::to_string(watt_limit) +
         "\n[engine]\nkind = \"external\"\nattach_kind = \"vllm\"\nmodel = \"m\"\nurl = \"http://127.0.0.1:" +
         std::to_string(sim_port) + "\"\n[state.etcd]\nendpoints = [\"http://" + etcd + "\"]\nprefix = \"" +
         prefix +
         "\"\n[power]\npoll_interval_ms = 100\n[[power.sources]]\nkind = \"dcgm_exporter\"\n"
         "url = \"http://127.0.0.1:" +
         std::to_string(sim_port) + "/dcgm/metrics\"\n";
}

TEST(AgentPower, publishes_watts_energy_and_the_lower_watt_limit_and_reloads_it_on_sighup) {
  auto& etcd = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(etcd.admin_endpoint());
  const std::string prefix = etcd::itest::fresh_prefix(*admin) + "power";
  cgn::testing::EngineSim sim(sim_on("127.0.0.1"));
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  const auto port = static_cast<uint16_t>(cgn::testing::free_port());
  const std::string cfg = dir.file("agent.toml");
  // Configured 900 W; the simulated board enforces 700 W: the record carries the lower one.
  cgn::testing::write_file(cfg, agent_config(port, sim.port(), etcd.endpoint(), prefix, 900));
  Process agent({cgn::testing::bin_path("cgn-agent"), "--config", cfg});
  const std::string key = prefix + "/nodes/power-1";
  auto record = [&]() -> std::optional<cluster::NodeRecord> {
    auto r = admin->get(key);
    if (!r.ok() || r->kvs.empty()) {
      return std::nullopt;
    }
    auto rec = cluster::parse_node_record(r->kvs.front().value);
    return rec.ok() ? std::optional(*rec) : std::nullopt;
  };
  std::optional<cluster::NodeRecord> first;
  ASSERT_TRUE(wait_until(
      [&] {
        first = record();
        return first && first->power_watts && first->energy_joules;
      },
      20s))
      << agent.log();
  EXPECT_GE(*first->power_watts, 75.0 - 1e-6);  // at least the model's idle draw
  EXPECT_EQ(first->watt_limit, 700.0);
  // Energy grows from the counter (idle 75 W: about 7.5 J per 100 ms).
  const double e0 = *first->energy_joules;
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = record();
        return r && r->energy_joules && *r->energy_joules > e0 + 10;
      },
      20s))
      << agent.log();

  // Lower the configured limit below the enforced one and reload.
  cgn::testing::write_file(cfg, agent_config(port, sim.port(), etcd.endpoint(), prefix, 250));
  agent.signal(SIGHUP);
  EXPECT_TRUE(wait_until(
      [&] {
        auto r = record();
        return r && r->watt_limit == 250.0;
      },
      20s))
      << agent.log();
  // A broken config keeps the limit and says why.
  cgn::testing::write_file(cfg, "[agent]\nwatt_limit = \"lots\"\n");
  agent.signal(SIGHUP);
  EXPECT_TRUE(wait_until([&] { return agent.log().find("reload failed") != std::string::npos; }, 20s))
      << agent.log();
  EXPECT_EQ(record()->watt_limit, 250.0);
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(15s), 0);
}

TEST(AgentPower, a_power_source_that_is_down_leaves_the_record_without_watts) {
  auto& etcd = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(etcd.admin_endpoint());
  const std::string prefix = etcd::itest::fresh_prefix(*admin) + "nopower";
  cgn::testing::EngineSim sim(sim_on("127.0.0.1"));
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  const auto port = static_cast<uint16_t>(cgn::testing::free_port());
  const auto dead = static_cast<uint16_t>(cgn::testing::free_port());  // nothing listens there
  const std::string cfg = dir.file("agent.toml");
  std::string text = agent_config(port, sim.port(), etcd.endpoint(), prefix, 300);
  const std::string page = std::to_string(sim.port()) + "/dcgm/metrics";
  text.replace(text.find(page), page.size(), std::to_string(dead) + "/dcgm/metrics");
  cgn::testing::write_file(cfg, text);
  Process agent({cgn::testing::bin_path("cgn-agent"), "--config", cfg});
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = admin->get(prefix + "/nodes/power-1");
        if (!r.ok() || r->kvs.empty()) {
          return false;
        }
        auto rec = cluster::parse_node_record(r->kvs.front().value);
        return rec.ok() && rec->ready;
      },
      20s))
      << agent.log();
  auto r = admin->get(prefix + "/nodes/power-1");
  ASSERT_TRUE(r.ok() && !r->kvs.empty());
  const std::string json = r->kvs.front().value;
  EXPECT_EQ(json.find("power_watts"), std::string::npos) << json;
  EXPECT_EQ(json.find("energy_joules"), std::string::npos) << json;
  EXPECT_NE(json.find("\"watt_limit\":300"), std::string::npos) << json;
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(15s), 0);
}

}  // namespace
}  // namespace cgn::agent
