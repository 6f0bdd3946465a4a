// AgentApp's lifecycle without a process: the app object attached to a real cgn-engine-sim
// ([engine] kind = "external") on loopback, the static backend, the data path and the gRPC
// service on ports picked by the kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "agent/agent_app.h"
#include "agent/agent_grpc.h"
#include "agent/agent_itest_util.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::testing::TempDir;
using cgn::testing::wait_until;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The agent attached to the simulator at 127.0.0.1:`engine_port`, serving on `listen`.
AgentSetup setup_for(const TempDir& dir, uint16_t engine_port, const std::string& listen = "127.0.0.1:0",
                     const std::string& grpc_listen = "127.0.0.1:0") {
  const std::string cfg = dir.file("agent.toml");
  cgn::testing::write_file(cfg, "[agent]\nnode_id = \"app-1\"\nlisten = \"" + listen +
                                    "\"\ngrpc_listen = \"" + grpc_listen +
                                    "\"\nstate_backend = \"static\"\nprobe_interval_ms = 20\n"
                                    "[engine]\nkind = \"external\"\nattach_kind = \"vllm\"\nmodel = \"m\"\n"
                                    "url = \"http://127.0.0.1:" +
                                    std::to_string(engine_port) + "\"\n");
  const char* argv[] = {"cgn-agent", "--config", cfg.c_str()};
  auto setup = parse_agent_options(3, argv);
  EXPECT_TRUE(setup.ok()) << (setup.ok() ? "" : setup.error().message);
  return setup.ok() ? std::move(*setup) : AgentSetup{};
}

bool grpc_answers(uint16_t port) {
  return call_agent_health("127.0.0.1:" + std::to_string(port), 1s).ok();
}

TEST(AgentApp, start_serves_health_and_proxies_a_chat_and_stop_closes_the_ports) {
  cgn::testing::EngineSim sim(itest::sim_on("127.0.0.1"));
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  AgentApp app(setup_for(dir, sim.port()));
  auto started = app.start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  const uint16_t port = app.port();
  const uint16_t grpc_port = app.grpc_port();
  ASSERT_GT(port, 0);
  ASSERT_GT(grpc_port, 0);
  ASSERT_TRUE(wait_until([&] { return itest::agent_healthy(port); }, 15s));
  const auto [status, body] = itest::chat_via(port, "hello");
  EXPECT_EQ(status, 200u) << body;
  EXPECT_THAT(body, HasSubstr("chat.completion"));
  EXPECT_TRUE(grpc_answers(grpc_port));

  const auto t0 = std::chrono::steady_clock::now();
  app.stop(SteadyClock::instance().now() + 5 * kNanosPerSecond);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_FALSE(loopback_get("127.0.0.1", port, "/health", 500ms).ok());
  EXPECT_FALSE(grpc_answers(grpc_port));
  // A second stop has nothing left to do; nor has the destructor.
  const auto t1 = std::chrono::steady_clock::now();
  app.stop(SteadyClock::instance().now() + 5 * kNanosPerSecond);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 1s);
  // The external engine was only attached to: it still serves.
  EXPECT_TRUE(loopback_get("127.0.0.1", sim.port(), "/health", 2s).ok());
}

// The deadline is read on the injected clock: one already past stops the data path with no grace,
// though a long stream is still being relayed ([router.timeouts] shutdown_grace_ms is 30 s).
TEST(AgentApp, a_deadline_already_past_on_the_injected_clock_cuts_a_stream_in_flight) {
  cgn::testing::EngineSimOptions o;
  o.host = "127.0.0.1";
  o.args = {"--time-scale", "1"};
  cgn::testing::EngineSim sim(o);
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  ManualClock clock(1000 * kNanosPerSecond);
  AgentApp app(setup_for(dir, sim.port()), clock);
  ASSERT_TRUE(app.start().ok());
  ASSERT_TRUE(wait_until([&] { return itest::agent_healthy(app.port()); }, 15s));
  const std::string body =
      R"({"model":"m","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"hi"}]})";
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = itest::connect_loopback(app.port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  char buf[4096];
  const ssize_t first = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(first, 0);
  ASSERT_THAT(std::string(buf, static_cast<size_t>(first)),
              StartsWith("HTTP/1.1 200"));  // the stream has begun
  const auto t0 = std::chrono::steady_clock::now();
  app.stop(clock.now() - kNanosPerSecond);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  // The client sees the stream cut, not finished: the connection closes without the last chunk.
  std::string rest;
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
    rest.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  EXPECT_EQ(rest.find("[DONE]"), std::string::npos);
}

TEST(AgentApp, stop_without_start_and_destruction_without_stop_are_harmless) {
  cgn::testing::EngineSim sim(itest::sim_on("127.0.0.1"));
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  {
    AgentApp never_started(setup_for(dir, sim.port()));
    never_started.stop(SteadyClock::instance().now());
    EXPECT_EQ(never_started.port(), 0);
  }
  uint16_t port = 0;
  {
    AgentApp app(setup_for(dir, sim.port()));
    ASSERT_TRUE(app.start().ok());
    port = app.port();
    ASSERT_TRUE(wait_until([&] { return itest::agent_healthy(port); }, 15s));
  }  // the destructor stops it
  EXPECT_FALSE(loopback_get("127.0.0.1", port, "/health", 500ms).ok());
}

TEST(AgentApp, an_occupied_listen_port_is_an_error_naming_it_and_nothing_keeps_running) {
  cgn::testing::EngineSim sim(itest::sim_on("127.0.0.1"));
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  // The simulator already listens on its port.
  const std::string taken = "127.0.0.1:" + std::to_string(sim.port());
  AgentApp app(setup_for(dir, sim.port(), taken));
  auto started = app.start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().code, 2);
  EXPECT_THAT(started.error().message, StartsWith("cgn-agent: cannot serve on " + taken + ": "));
  // The gRPC service started before the data path failed is stopped again.
  ASSERT_GT(app.grpc_port(), 0);
  EXPECT_FALSE(grpc_answers(app.grpc_port()));
  app.stop(SteadyClock::instance().now());  // harmless after a failed start
}

TEST(AgentApp, an_unusable_grpc_listen_address_is_an_error_naming_the_key) {
  TempDir dir;
  AgentApp app(setup_for(dir, 8100, "127.0.0.1:0", "256.1.1.1:0"));
  auto started = app.start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().code, 2);
  EXPECT_THAT(started.error().message, StartsWith("cgn-agent: [agent] grpc_listen: "));
  EXPECT_THAT(started.error().message, HasSubstr("256.1.1.1:0"));
  EXPECT_EQ(app.port(), 0);
}

TEST(AgentPrintMode, print_record_is_status_0_with_the_record_and_no_flag_runs) {
  TempDir dir;
  AgentSetup s = setup_for(dir, 8100);
  EXPECT_FALSE(agent_print_mode(s).has_value());
  s.print_record = true;
  auto printed = agent_print_mode(s);
  ASSERT_TRUE(printed.has_value());
  EXPECT_EQ(printed->code, 0);
  const auto record = nlohmann::json::parse(printed->message);
  EXPECT_EQ(record["node_id"], "app-1");
  EXPECT_EQ(record["engine"], "external");
}

}  // namespace
}  // namespace cgn::agent
