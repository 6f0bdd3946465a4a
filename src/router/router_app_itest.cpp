// RouterApp's lifecycle without a process: the real Gateway on loopback (port 0) over the static
// backend, an in-process FakeEngine upstream, real HTTP, the real port file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "router/fake_engine.h"
#include "router/router_app.h"
#include "router/router_itest.h"
#include "testing/process.h"

namespace cgn::router {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr auto kGenerous = 30s;

// The setup cgn-router builds from these flags (quick lab: --listen, --node).
RouterSetup quick_lab(std::vector<std::string> flags) {
  std::vector<const char*> argv{"cgn-router"};
  for (const auto& f : flags) {
    argv.push_back(f.c_str());
  }
  auto setup = parse_router_options(static_cast<int>(argv.size()), argv.data(), ".", "");
  EXPECT_TRUE(setup) << setup.error().message;
  return setup ? std::move(*setup) : RouterSetup{};
}

RouterSetup over(const testing::FakeEngine& engine, const std::string& listen = "127.0.0.1:0") {
  return quick_lab({"--listen", listen, "--node", engine.url(), "--poll-interval-ms", "50", "--log-level",
                    "warn", "--threads", "2"});
}

TEST(RouterApp, StartServesAChatCompletionAndStopIsBoundedAndIdempotent) {
  testing::FakeEngine engine("only");
  ASSERT_NE(engine.start(), 0);
  cgn::testing::TempDir dir;
  RouterSetup setup = over(engine);
  setup.port_file = dir.file("port");
  RouterApp app(std::move(setup));
  auto port = app.start();
  ASSERT_TRUE(port) << port.error().message;
  ASSERT_GT(*port, 0);
  EXPECT_EQ(app.port(), *port);
  EXPECT_EQ(cgn::testing::read_file(dir.file("port")), std::to_string(*port) + "\n");
  ASSERT_NE(app.gateway(), nullptr);
  ASSERT_TRUE(cgn::testing::wait_until([&] { return app.gateway()->healthy_nodes() == 1; }, kGenerous));

  itest::Client client(*port);
  const auto reply = client.post("/v1/chat/completions", itest::chat_body("hello"));
  ASSERT_FALSE(reply.failed);
  EXPECT_EQ(reply.status, 200u) << reply.body;
  EXPECT_EQ(reply.header("X-CGN-Node"),
            "127.0.0.1:" + std::to_string(engine.port()));  // quick lab: named by address
  EXPECT_EQ(reply.json()["object"], "chat.completion") << reply.body;
  EXPECT_EQ(engine.generations.load(), 1);

  const auto t0 = steady_clock::now();
  app.stop(SteadyClock::instance().now() + 5 * kNanosPerSecond);
  EXPECT_LT(steady_clock::now() - t0, kGenerous);
  EXPECT_TRUE(itest::Client(*port).get("/health").failed) << "the port still answers after stop";

  const auto t1 = steady_clock::now();
  app.stop(SteadyClock::instance().now() + 5 * kNanosPerSecond);  // a no-op
  EXPECT_LT(steady_clock::now() - t1, 1s);
  engine.stop();
}

TEST(RouterApp, AStartFailureIsAnErrorValueNamingTheCauseAndLeavesNothingRunning) {
  testing::FakeEngine engine("only");
  ASSERT_NE(engine.start(), 0);
  {
    // The engine holds the port: the router cannot listen there.
    RouterApp app(over(engine, "127.0.0.1:" + std::to_string(engine.port())));
    auto port = app.start();
    ASSERT_FALSE(port);
    EXPECT_EQ(port.error().code, 1);
    EXPECT_THAT(port.error().message, StartsWith("cgn-router: "));
    EXPECT_THAT(port.error().message, HasSubstr(std::to_string(engine.port())));
    EXPECT_EQ(app.gateway(), nullptr);
    app.stop(SteadyClock::instance().now());  // a no-op after a failed start
  }
  {
    RouterSetup setup = over(engine);
    setup.config.router.state_backend = "zookeeper";
    RouterApp app(std::move(setup));
    auto port = app.start();
    ASSERT_FALSE(port);
    EXPECT_EQ(port.error().code, 2);
    EXPECT_THAT(port.error().message, HasSubstr("zookeeper"));
    EXPECT_EQ(app.gateway(), nullptr);
  }
  {
    // A policy name the registry does not know (the config file's own check names the file and
    // line; this is the gateway's, for options built in code).
    RouterSetup setup = over(engine);
    setup.gateway.router.policy = "fastest";
    RouterApp app(std::move(setup));
    auto port = app.start();
    ASSERT_FALSE(port);
    EXPECT_THAT(port.error().message,
                HasSubstr("[router] policy: routing policy \"fastest\" is not registered; registered: kv, "
                          "round_robin, random, least_load, session"));
    EXPECT_EQ(app.gateway(), nullptr);
  }
  {
    cgn::testing::TempDir dir;
    RouterSetup setup = over(engine);
    setup.port_file = dir.file("missing-dir/port");
    RouterApp app(std::move(setup));
    auto port = app.start();
    ASSERT_FALSE(port);
    EXPECT_EQ(port.error().code, 2);
    EXPECT_THAT(port.error().message, HasSubstr("--port-file"));
    EXPECT_THAT(port.error().message, HasSubstr("missing-dir/port.tmp"));
    EXPECT_EQ(app.gateway(), nullptr);
  }
  EXPECT_EQ(engine.generations.load(), 0);
  engine.stop();
}

TEST(RouterApp, DestructionWithoutStopClosesThePortAndStopWithoutStartIsANoOp) {
  testing::FakeEngine engine("only");
  ASSERT_NE(engine.start(), 0);
  {
    RouterApp never_started(over(engine));
    never_started.stop(SteadyClock::instance().now());
    EXPECT_EQ(never_started.gateway(), nullptr);
  }
  uint16_t port = 0;
  {
    RouterApp app(over(engine));
    auto started = app.start();
    ASSERT_TRUE(started) << started.error().message;
    port = *started;
    EXPECT_EQ(itest::Client(port).get("/health").status, 200u);
  }
  EXPECT_TRUE(itest::Client(port).get("/health").failed) << "the port still answers after destruction";
  engine.stop();
}

TEST(RouterApp, ReloadAppliesTheConfigFileAndReportsWhyItCannot) {
  testing::FakeEngine engine("only");
  ASSERT_NE(engine.start(), 0);
  cgn::testing::TempDir dir;
  const std::string cfg = dir.file("cognitora.toml");
  const std::string nodes = "[[router.nodes]]\nurl = \"" + engine.url() + "\"\n";
  cgn::testing::write_file(cfg, "[router]\nlisten = \"127.0.0.1:0\"\npolicy = \"kv\"\n" + nodes);
  RouterApp app(quick_lab({"--config", cfg, "--log-level", "warn"}));
  ASSERT_TRUE(app.start());

  cgn::testing::write_file(cfg, "[router]\nlisten = \"127.0.0.1:0\"\npolicy = \"round_robin\"\n" + nodes);
  EXPECT_TRUE(app.reload());
  cgn::testing::write_file(cfg, "[router]\npolicy = \"nonsense\"\n");
  auto bad = app.reload();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, OptionsError::kConfig);
  EXPECT_THAT(bad.error().message, HasSubstr("nonsense"));

  RouterApp lab(over(engine));
  ASSERT_TRUE(lab.start());
  auto no_file = lab.reload();
  ASSERT_FALSE(no_file);
  EXPECT_THAT(no_file.error().message, HasSubstr("--config"));
  engine.stop();
}

}  // namespace
}  // namespace cgn::router
