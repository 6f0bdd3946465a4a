// Request intake against the real binaries: what a client with a network path (and sometimes a
// key) can and cannot make the router do. Each test reproduces a probe of the router as it was
// and checks the answer it gives now.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "router/e2e_testing.h"

namespace cgn::router::e2e {
namespace {

constexpr char kKey[] = "sk-intake-e2e-0123456789abcdef";

// kB of a "VmRSS:" / "VmHWM:" line in /proc/<pid>/status; -1 when absent.
long status_kb(pid_t pid, const std::string& field) {
  std::string path = "/proc/";
  path += std::to_string(pid);
  path += "/status";
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stol(line.substr(field.size() + 1));
    }
  }
  return -1;
}

std::string keys_file(const TempDir& dir) {
  cgn::testing::write_file(dir.file("keys"), std::string(kKey) + "\n");
  std::string toml = "api_keys_file = \"";
  toml += dir.file("keys");
  toml += "\"\n";
  return toml;
}

// Probe: 100 connections without a key, each announcing an 8 MiB body and sending all of it but
// the last byte, took the router from 106 MB to 925 MB and held it there up to 60 s (the key was
// checked only once the whole body was in). Now: 401 at once, from the headers, and memory stays.
TEST(IntakeE2E, UnauthenticatedEightMiBBodiesGet401BeforeTheyAreReadAndMemoryStaysFlat) {
  Sim a("a", {"--time-scale", "0.05"});
  TempDir dir;
  Router r({&a}, "", keys_file(dir));
  const pid_t pid = r.proc->pid();
  const long rss_before = status_kb(pid, "VmRSS");
  ASSERT_GT(rss_before, 0);

  constexpr int kConns = 100;
  constexpr size_t kBody = size_t{8} << 20;
  std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\n";
  head += "Content-Length: ";
  head += std::to_string(kBody);
  head += "\r\n\r\n";
  struct Conn {
    int fd = -1;
    size_t sent = 0;  // body bytes
    std::string got;
    bool answered = false;
    bool dead = false;
  };
  std::vector<Conn> conns(kConns);
  for (Conn& c : conns) {
    c.fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(r.port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::send(c.fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    ::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) | O_NONBLOCK);
  }
  // Each connection reads what came back, then pushes up to 64 KiB more of its body; the last
  // byte never goes, so a body is never complete and only an answer from the headers can arrive.
  const std::string chunk(64 * 1024, ' ');
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  int answered = 0;
  while (answered < kConns && std::chrono::steady_clock::now() < deadline) {
    bool progress = false;
    for (Conn& c : conns) {
      if (c.answered || c.dead) {
        continue;
      }
      char buf[4096];
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.got.append(buf, static_cast<size_t>(n));
        progress = true;
        if (c.got.find("\r\n\r\n") != std::string::npos) {
          c.answered = true;
          ++answered;
          continue;
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        c.dead = true;
        continue;
      }
      const size_t want = std::min(chunk.size(), kBody - 1 - c.sent);
      if (want > 0) {
        const ssize_t w = ::send(c.fd, chunk.data(), want, MSG_NOSIGNAL);
        if (w > 0) {
          c.sent += static_cast<size_t>(w);
          progress = true;
        }
      }
    }
    if (!progress) {
      pollfd p{conns.front().fd, POLLIN, 0};
      (void)::poll(&p, 1, 5);  // nothing moved: yield a little instead of spinning
    }
  }
  const long hwm = status_kb(pid, "VmHWM");
  const long rss_after = status_kb(pid, "VmRSS");
  size_t max_sent = 0;
  int status_401 = 0;
  for (Conn& c : conns) {
    max_sent = std::max(max_sent, c.sent);
    status_401 += c.got.rfind("HTTP/1.1 401", 0) == 0 ? 1 : 0;
    ::close(c.fd);
  }
  std::printf(
      "router RSS before %ld kB, peak %ld kB, after %ld kB; growth to peak %.1f MB; "
      "401s %d/%d; most body bytes one client pushed %zu\n",
      rss_before, hwm, rss_after, static_cast<double>(hwm - rss_before) / 1024.0, status_401, kConns,
      max_sent);
  EXPECT_EQ(status_401, kConns);
  EXPECT_LT(hwm - rss_before, 50 * 1024) << "peak RSS grew by more than 50 MB";
  EXPECT_TRUE(r.proc->running());
  EXPECT_GE(r.metric("cgn_router_rejections_total{reason=\"auth\"}"), static_cast<double>(kConns));
  // Nothing reached the engine, and a client with the key is served as before.
  EXPECT_EQ(
      post(r.port, "/v1/chat/completions", chat("hello"), {{"Authorization", std::string("Bearer ") + kKey}})
          .status,
      200u);
}

// Probe: bad keys, caps and rejected parameters were counted but never logged. Now one line per
// reason and client address per interval, naming neither the key nor the prompt.
TEST(IntakeE2E, RefusalsAreLoggedOncePerReasonAndClientWithoutTheKeyOrThePrompt) {
  Sim a("a", {"--time-scale", "0.05"});
  TempDir dir;
  Router r({&a}, "", keys_file(dir));
  for (int i = 0; i < 5; ++i) {
    const Reply bad = post(r.port, "/v1/chat/completions", chat("prompt-secret-zebra"),
                           {{"Authorization", "Bearer sk-wrong-key-value-987654321"}});
    EXPECT_EQ(bad.status, 401u);
  }
  const json kv = {{"model", "m"},
                   {"messages", json::array({{{"role", "user"}, {"content", "prompt-secret-zebra"}}})},
                   {"kv_transfer_params", {{"remote_host", "10.9.9.9"}, {"remote_port", 5600}}}};
  const Reply refused =
      post(r.port, "/v1/chat/completions", kv.dump(), {{"Authorization", std::string("Bearer ") + kKey}});
  EXPECT_EQ(refused.status, 400u);
  EXPECT_EQ(refused.json_body()["error"]["param"], "kv_transfer_params");
  auto count = [](const std::string& log, const std::string& needle) {
    int n = 0;
    for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  ASSERT_TRUE(wait_until([&] { return count(r.proc->log(), "reason=kv_transfer_params") == 1; }, 10s))
      << r.proc->log();
  const std::string log = r.proc->log();
  EXPECT_EQ(count(log, "request refused reason=auth client=127.0.0.1"), 1) << log;
  EXPECT_EQ(log.find("sk-wrong-key"), std::string::npos) << log;
  EXPECT_EQ(log.find(kKey), std::string::npos) << log;
  EXPECT_EQ(log.find("zebra"), std::string::npos) << log;
  EXPECT_EQ(r.metric("cgn_router_rejections_total{reason=\"auth\"}"), 5.0);
}

// Probe: one authenticated request with "X-Sim-Fault: exit" shut down both simulators behind the
// router. Now no client header outside the allow-list reaches an engine; tests that need a fault
// behind the router use the simulator's rule file, which no client can reach.
TEST(IntakeE2E, AClientsFaultHeaderNeverReachesTheEngines) {
  Sim a("a", {"--time-scale", "0.05"});
  Sim b("b", {"--time-scale", "0.05"});
  Router r({&a, &b});
  for (int i = 0; i < 4; ++i) {
    const Reply rep = post(r.port, "/v1/chat/completions", chat(std::string("x").append(std::to_string(i))),
                           {{"X-Sim-Fault", "exit"}});
    EXPECT_EQ(rep.status, 200u) << rep.body;
  }
  EXPECT_TRUE(a.process().running());
  EXPECT_TRUE(b.process().running());
}

// Probe: /dashboard/ served every file in its folder, mock_metrics.py included. Now only the
// dashboard's own files; /metrics keeps its open, CORS-enabled default.
TEST(IntakeE2E, TheDashboardServesOnlyItsOwnFilesAndMetricsStayOpenByDefault) {
  Sim a("a", {"--time-scale", "0.05"});
  Router r({&a});
  EXPECT_EQ(get(r.port, "/dashboard/index.html").status, 200u);
  EXPECT_EQ(get(r.port, "/dashboard/mock_metrics.py").status, 404u);
  EXPECT_EQ(get(r.port, "/dashboard/README.md").status, 404u);
  const Reply m = get(r.port, "/metrics");
  EXPECT_EQ(m.status, 200u);
  EXPECT_EQ(m.header("Access-Control-Allow-Origin"), "*");
}

}  // namespace
}  // namespace cgn::router::e2e
