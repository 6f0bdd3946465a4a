// Every daemon tells systemd when it is ready and when it stops (core/sd_notify.h): each binary runs
// with NOTIFY_SOCKET naming a datagram socket this test owns, on loopback with port 0. READY=1 must
// arrive after it listens, STOPPING=1 after SIGTERM, and the router's SIGHUP reload is framed by
// RELOADING=1 and READY=1. The units in packaging/systemd/ are Type=notify and rely on this.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "testing/engine_sim.h"
#include "testing/process.h"

namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;

// The service manager's end: an AF_UNIX datagram socket bound in a temporary folder.
class NotifySocket {
 public:
  explicit NotifySocket(const TempDir& dir) : path_(dir.file("notify.sock")) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }

  // Datagrams until one contains `line` as a whole line, or `timeout`; returns whether it came and
  // keeps everything received in seen().
  bool wait_for(const std::string& line, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) <= 0) {
        continue;
      }
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        continue;
      }
      const std::string msg(buf, static_cast<size_t>(n));
      seen_.push_back(msg);
      if (("\n" + msg + "\n").find("\n" + line + "\n") != std::string::npos) {
        return true;
      }
    }
    return false;
  }

  std::string seen() const {
    std::string all;
    for (const auto& m : seen_) {
      all += "[" + m + "] ";
    }
    return all;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
  std::vector<std::string> seen_;
};

// Runs argv with NOTIFY_SOCKET set; READY=1 must arrive, then STOPPING=1 after SIGTERM and exit 0.
void expect_ready_then_stopping(std::vector<std::string> argv, const TempDir& dir,
                                const std::function<void(Process&, NotifySocket&)>& while_ready = {}) {
  NotifySocket sock(dir);
  ASSERT_TRUE(sock.bound()) << sock.path();
  Process p(std::move(argv), {{"NOTIFY_SOCKET", sock.path()}});
  ASSERT_TRUE(sock.wait_for("READY=1", 60s)) << sock.seen() << "\n" << p.log();
  if (while_ready) {
    while_ready(p, sock);
  }
  p.signal(SIGTERM);
  EXPECT_TRUE(sock.wait_for("STOPPING=1", 30s)) << sock.seen() << "\n" << p.log();
  EXPECT_EQ(p.wait(30s), 0) << p.log();
}

TEST(SdNotify, router_is_ready_reloads_on_sighup_and_stops) {
  TempDir dir;
  const std::string cfg = dir.file("cognitora.toml");
  cgn::testing::write_file(cfg,
                           "[router]\nlisten = \"127.0.0.1:0\"\npolicy = \"kv\"\n"
                           "[[router.nodes]]\nurl = \"http://127.0.0.1:9\"\nname = \"n\"\n");
  expect_ready_then_stopping({cgn::testing::bin_path("cgn-router"), "--config", cfg}, dir,
                             [](Process& p, NotifySocket& sock) {
                               p.signal(SIGHUP);
                               EXPECT_TRUE(sock.wait_for("RELOADING=1", 30s)) << sock.seen() << p.log();
                               EXPECT_TRUE(sock.wait_for("READY=1", 30s)) << sock.seen() << p.log();
                             });
}

TEST(SdNotify, engine_sim_is_ready_and_stops) {
  TempDir dir;
  expect_ready_then_stopping({cgn::testing::bin_path("cgn-engine-sim"), "--flavour", "vllm", "--model", "m",
                              "--host", "127.0.0.1", "--port", "0", "--port-file", dir.file("port")},
                             dir);
}

TEST(SdNotify, agent_is_ready_and_stops) {
  cgn::testing::EngineSimOptions o;
  o.args = {"--time-scale", "0.001"};
  cgn::testing::EngineSim sim(o);
  ASSERT_GT(sim.port(), 0) << sim.log();
  TempDir dir;
  const std::string cfg = dir.file("agent.toml");
  cgn::testing::write_file(
      cfg, "[agent]\nnode_id = \"sd-1\"\nlisten = \"127.0.0.1:" + std::to_string(cgn::testing::free_port()) +
               "\"\ngrpc_listen = \"127.0.0.1:0\"\n[engine]\nkind = \"external\"\n"
               "attach_kind = \"vllm\"\nmodel = \"m\"\nurl = \"" +
               sim.url() + "\"\n");
  expect_ready_then_stopping({cgn::testing::bin_path("cgn-agent"), "--config", cfg}, dir);
}

TEST(SdNotify, kvcached_is_ready_and_stops) {
  TempDir dir;
  expect_ready_then_stopping(
      {cgn::testing::bin_path("cgn-kvcached"), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
       "--socket", "", "--port-file", dir.file("port")},
      dir);
}

TEST(SdNotify, power_is_ready_once_it_serves_and_stops) {
  TempDir dir;
  cgn::testing::write_file(dir.file("power.toml"), "[[power.sources]]\nkind = \"static\"\nwatts = 10\n");
  expect_ready_then_stopping(
      {cgn::testing::bin_path("cgn-power"), "--config", dir.file("power.toml"), "--listen", "127.0.0.1:0",
       "--metrics-listen", "127.0.0.1:0", "--port-file", dir.file("port")},
      dir, [&](Process& p, NotifySocket&) {
        // READY=1 came after the port file: it is written once the daemon serves.
        EXPECT_TRUE(std::filesystem::exists(dir.file("port"))) << p.log();
      });
}

TEST(SdNotify, gossip_member_is_ready_and_stops) {
  TempDir dir;
  expect_ready_then_stopping({cgn::testing::bin_path("cgn-gossip"), "--name", "sd-1", "--listen",
                              "127.0.0.1:0", "--insecure", "--port-file", dir.file("port")},
                             dir);
}

}  // namespace
