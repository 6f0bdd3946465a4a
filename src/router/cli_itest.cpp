// The cgn-router binary end to end: a config file, a real process, SIGHUP reloading the routing
// policy, SIGTERM stopping cleanly, quick-lab flags. Upstream: an in-process FakeEngine.
#include <gtest/gtest.h>

#include <csignal>

#include "router/fake_engine.h"
#include "router/router_itest.h"
#include "testing/process.h"

namespace cgn::router {
namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;

std::string config_text(uint16_t engine_port, const std::string& policy, int queue_ms) {
  return "[router]\nlisten = \"127.0.0.1:0\"\npolicy = \"" + policy +
         "\"\n[router.timeouts]\nhealth_interval_ms = 100\nshutdown_grace_ms = 2000\n"
         "[router.routing.weights]\nqueue_ms_per_request = " +
         std::to_string(queue_ms) +
         "\n[[router.nodes]]\nurl = \"http://127.0.0.1:" + std::to_string(engine_port) +
         "\"\nname = \"only\"\n";
}

TEST(RouterBinary, SighupReloadsThePolicyAndSigtermStopsCleanly) {
  testing::FakeEngine engine("only");
  ASSERT_NE(engine.start(), 0);
  TempDir dir;
  const std::string cfg = dir.file("cognitora.toml");
  cgn::testing::write_file(cfg, config_text(engine.port(), "kv", 50));
  Process p({cgn::testing::bin_path("cgn-router"), "--config", cfg, "--port-file", dir.file("port")});
  ASSERT_GT(cgn::testing::wait_for_port_file(dir.file("port"), p, 10s), 0) << p.describe() << "\n" << p.log();
  ASSERT_TRUE(cgn::testing::wait_until(
      [&] { return p.log().find("node in routing node=only") != std::string::npos; }, 10s))
      << p.log();

  p.signal(SIGHUP);
  ASSERT_TRUE(cgn::testing::wait_until(
      [&] { return p.log().find("configuration reloaded; routing policy unchanged") != std::string::npos; },
      10s))
      << p.log();

  cgn::testing::write_file(cfg, config_text(engine.port(), "round_robin", 100));
  p.signal(SIGHUP);
  ASSERT_TRUE(cgn::testing::wait_until(
      [&] {
        return p.log().find("changes=\"policy kv -> round_robin, queue_seconds 0.05 -> 0.1\"") !=
               std::string::npos;
      },
      10s))
      << p.log();

  cgn::testing::write_file(cfg, "[router]\npolicy = \"nonsense\"\n");
  p.signal(SIGHUP);
  ASSERT_TRUE(cgn::testing::wait_until(
      [&] { return p.log().find("reload failed; keeping the current policy") != std::string::npos; }, 10s))
      << p.log();

  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(10s), 0) << p.log();
  engine.stop();
}

TEST(RouterBinary, BadFlagsExitWithUsageErrors) {
  Process p({cgn::testing::bin_path("cgn-router"), "--policy", "fastest"});
  EXPECT_EQ(p.wait(10s), 2);
  EXPECT_NE(p.log().find("--policy \"fastest\" is not one of"), std::string::npos) << p.log();
  Process q({cgn::testing::bin_path("cgn-router"), "--node", "ftp://x", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(q.wait(10s), 2);
  EXPECT_NE(q.log().find("must start with http:// or https://"), std::string::npos) << q.log();
}

}  // namespace
}  // namespace cgn::router
