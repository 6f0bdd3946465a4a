// SimApp's lifecycle on loopback: the real server, real sockets, the real port file.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "sim/shell/app.h"
#include "testing/process.h"

namespace cgn::sim {
namespace {

using std::chrono::steady_clock;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr auto kGenerous = std::chrono::seconds(30);

SimSetup setup_on_loopback(const std::string& port_file = "") {
  SimSetup s;
  s.shell.sim.model = "m";
  s.shell.sim.served_model_name = "m";
  s.shell.sim.host = "127.0.0.1";
  s.shell.sim.port = 0;
  s.port_file = port_file;
  s.log_level = "warn";
  return s;
}

bool port_open(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// One HTTP/1.1 GET with Connection: close; the whole response.
std::string http_get(uint16_t port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

TEST(SimApp, StartServesAndWritesThePortFileStopClosesThePort) {
  testing::TempDir dir;
  SimApp app(setup_on_loopback(dir.file("port")));
  auto port = app.start();
  ASSERT_TRUE(port) << port.error().message;
  ASSERT_GT(*port, 0);
  EXPECT_EQ(app.port(), *port);
  EXPECT_EQ(testing::read_file(dir.file("port")), std::to_string(*port) + "\n");
  const std::string models = http_get(*port, "/v1/models");
  EXPECT_THAT(models, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(models, HasSubstr("\"m\""));

  const auto t0 = steady_clock::now();
  app.stop(SteadyClock::instance().now() + kStopGrace);
  EXPECT_LT(steady_clock::now() - t0, kGenerous);
  EXPECT_FALSE(port_open(*port));
}

TEST(SimApp, StopTwiceIsHarmless) {
  SimApp app(setup_on_loopback());
  auto port = app.start();
  ASSERT_TRUE(port) << port.error().message;
  app.stop(SteadyClock::instance().now() + kStopGrace);
  app.stop(SteadyClock::instance().now() + kStopGrace);
  EXPECT_FALSE(port_open(*port));
}

TEST(SimApp, StopWithoutStartIsHarmless) {
  SimApp app(setup_on_loopback());
  app.stop(SteadyClock::instance().now() + kStopGrace);
  EXPECT_EQ(app.port(), 0);
}

// The loader thread (vLLM keeps its port closed while the model loads) is the app's to join: stop
// returns long before the load would end.
TEST(SimApp, StopWhileLoadingJoinsTheLoaderWithinTheDeadline) {
  SimSetup s = setup_on_loopback();
  s.shell.sim.load_seconds = 3600;
  SimApp app(std::move(s));
  auto port = app.start();
  ASSERT_TRUE(port) << port.error().message;
  EXPECT_FALSE(port_open(*port));  // reserved, not listening
  const auto t0 = steady_clock::now();
  app.stop(SteadyClock::instance().now() + kStopGrace);
  EXPECT_LT(steady_clock::now() - t0, kGenerous);
}

// The deadline is read on the injected clock: one already past stops with no grace, even with a
// request in flight.
TEST(SimApp, DeadlineIsReadOnTheInjectedClock) {
  ManualClock clock(100 * kNanosPerSecond);
  SimApp app(setup_on_loopback(), clock);
  auto port = app.start();
  ASSERT_TRUE(port) << port.error().message;
  const auto t0 = steady_clock::now();
  app.stop(clock.now() - kNanosPerSecond);
  EXPECT_LT(steady_clock::now() - t0, kGenerous);
  EXPECT_FALSE(port_open(*port));
}

TEST(SimApp, PortInUseIsStatusOneAndNothingRuns) {
  SimApp first(setup_on_loopback());
  auto port = first.start();
  ASSERT_TRUE(port) << port.error().message;
  SimSetup s = setup_on_loopback();
  s.shell.sim.port = *port;
  SimApp second(std::move(s));
  auto r = second.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 1);
  EXPECT_THAT(r.error().message, StartsWith("cgn-engine-sim: "));
  second.stop(SteadyClock::instance().now());
  EXPECT_TRUE(port_open(*port));  // the first one still serves
}

TEST(SimApp, UnwritablePortFileIsStatusTwoAndThePortIsClosed) {
  SimApp app(setup_on_loopback("/nonexistent-dir/port"));
  auto r = app.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 2);
  EXPECT_THAT(r.error().message, HasSubstr("cannot write /nonexistent-dir/port.tmp"));
  ASSERT_GT(app.port(), 0);
  EXPECT_FALSE(port_open(app.port()));
}

}  // namespace
}  // namespace cgn::sim
