// KvcachedApp's lifecycle (docs/design/lifecycle.md) in process, with real listeners on loopback
// and a real socket file: start serves every listener, stop closes them and removes the socket,
// stop twice and stop without start are no-ops, a start that fails (a port in use, a socket path
// that is taken) leaves nothing running and says why.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "kvcache/block_store.h"
#include "kvcached/fast_path.h"
#include "kvcached/kv_client.h"
#include "kvcached/kvcached_app.h"
#include "kvcached/kvcached_itest_util.h"
#include "kvcached/local_client.h"

namespace cgn::kvcached {
namespace {

using namespace itest;
using testing::TempDir;

KvcachedSetup setup_in(const TempDir& dir, const std::string& name = "kv") {
  KvcachedSetup s;
  auto& k = s.config.kvcached;
  k.listen = "127.0.0.1:0";
  k.metrics_listen = "127.0.0.1:0";
  k.socket = dir.file(name + ".sock");
  k.ram_bytes = 8ull << 20;
  k.max_block_bytes = 1ull << 20;
  s.log_level = "warn";
  return s;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool stats_answer(uint16_t port) {
  auto c = KvClient::connect("127.0.0.1:" + std::to_string(port), {});
  if (!c) {
    return false;
  }
  (*c)->set_timeout_ms(2000);
  return (*c)->stats().ok();
}

TEST(KvcachedApp, StartServesAndStopClosesEverything) {
  TempDir dir;
  KvcachedApp app(setup_in(dir));
  auto st = app.start();
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_NE(app.grpc_port(), 0);
  ASSERT_NE(app.metrics_port(), 0);
  const uint16_t grpc_port = app.grpc_port();
  const uint16_t metrics_port = app.metrics_port();
  EXPECT_TRUE(stats_answer(grpc_port));
  EXPECT_FALSE(scrape(metrics_port).empty());
  auto lc = LocalClient::connect(dir.file("kv.sock"));
  ASSERT_TRUE(lc.ok()) << lc.error().message;
  ASSERT_TRUE((*lc)->put(key_of(digest_of(1, 1)), block_bytes(1, 1, 4096)).ok());
  struct stat sst {};
  ASSERT_EQ(::stat(dir.file("kv.sock").c_str(), &sst), 0);
  EXPECT_EQ(sst.st_mode & 0777, 0660u);

  // A client that stays connected does not hold the stop up past its deadline.
  auto idle = KvClient::connect("127.0.0.1:" + std::to_string(grpc_port), {});
  ASSERT_TRUE(idle.ok());
  ASSERT_TRUE((*idle)->stats().ok());
  ASSERT_TRUE((*idle)->put(test_ns(), digest_of(1, 2), block_bytes(1, 2, 65536)).ok());
  ASSERT_TRUE((*idle)->get(test_ns(), digest_of(1, 2)).ok());
  ASSERT_TRUE((*idle)->batch_lookup(test_ns(), {{digest_of(1, 2)}}, 1000).ok());
  const auto t0 = std::chrono::steady_clock::now();
  app.stop(SteadyClock::instance().now() + kNanosPerSecond);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_FALSE(stats_answer(grpc_port));
  EXPECT_TRUE(scrape(metrics_port).empty());
  EXPECT_FALSE(exists(dir.file("kv.sock"))) << "the socket file is removed at stop";
  EXPECT_FALSE(LocalClient::connect(dir.file("kv.sock")).ok());
  app.stop(SteadyClock::instance().now());  // twice: a no-op
}

TEST(KvcachedApp, StopWithoutStartIsANoOp) {
  TempDir dir;
  KvcachedApp app(setup_in(dir));
  app.stop(SteadyClock::instance().now());
  EXPECT_EQ(app.grpc_port(), 0);
}

TEST(KvcachedApp, AStartOnAUsedPortFailsAndLeavesNothingRunning) {
  TempDir dir;
  KvcachedApp first(setup_in(dir, "a"));
  ASSERT_TRUE(first.start().ok());
  KvcachedSetup s = setup_in(dir, "b");
  s.config.kvcached.listen = "127.0.0.1:" + std::to_string(first.grpc_port());
  KvcachedApp second(std::move(s));
  auto st = second.start();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, 2);
  EXPECT_NE(st.error().message.find("[kvcached] listen"), std::string::npos) << st.error().message;
  EXPECT_EQ(second.grpc_port(), 0);
  EXPECT_EQ(second.metrics_port(), 0);
  EXPECT_EQ(second.store(), nullptr);
  EXPECT_FALSE(exists(dir.file("b.sock")));
  EXPECT_TRUE(stats_answer(first.grpc_port())) << "the first daemon is untouched";
}

TEST(KvcachedApp, TheSocketPathIsReplacedOnlyWhenStale) {
  TempDir dir;
  // A stale socket file: bound, then its owner went away without removing it.
  const std::string stale = dir.file("kv.sock");
  {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, stale.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(fd);
  }
  KvcachedApp app(setup_in(dir));
  auto st = app.start();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(LocalClient::connect(stale).ok());

  // A live one is not taken over.
  KvcachedApp second(setup_in(dir));
  auto taken = second.start();
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.error().message.find("another daemon is serving"), std::string::npos)
      << taken.error().message;
  EXPECT_TRUE(LocalClient::connect(stale).ok()) << "the first daemon's socket is still there";

  // A file that is not a socket is never removed.
  KvcachedSetup s = setup_in(dir, "plain");
  testing::write_file(dir.file("plain.sock"), "data");
  KvcachedApp third(std::move(s));
  auto not_socket = third.start();
  ASSERT_FALSE(not_socket.ok());
  EXPECT_NE(not_socket.error().message.find("is not a socket"), std::string::npos)
      << not_socket.error().message;
  EXPECT_EQ(testing::read_file(dir.file("plain.sock")), "data");
}

// One frame on a raw fast-path connection; its answer.
Response raw_call(int fd, const Request& r) {
  const auto bytes = encode(r);
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  std::vector<uint8_t> buf(kMaxFrameBytes);
  const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);  // a passed fd is closed by the kernel
  auto resp = decode_response(std::span<const uint8_t>(buf.data(), n > 0 ? static_cast<size_t>(n) : 0));
  EXPECT_TRUE(resp.ok());
  return resp.ok() ? *resp : Response{};
}

int raw_connect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

TEST(KvcachedApp, AConnectionThatClosesReleasesWhatItHeldAndLimitsHold) {
  TempDir dir;
  KvcachedSetup s = setup_in(dir);
  s.config.kvcached.max_handles_per_connection = 2;
  s.config.kvcached.max_connections = 2;
  KvcachedApp app(std::move(s));
  ASSERT_TRUE(app.start().ok());
  const kvcache::BlockKey key = key_of(digest_of(2, 1));
  {
    auto lc = LocalClient::connect(dir.file("kv.sock"));
    ASSERT_TRUE(lc.ok());
    ASSERT_TRUE((*lc)->put(key, block_bytes(2, 1, 4096)).ok());
  }
  const int fd = raw_connect(dir.file("kv.sock"));
  Request hello;
  hello.op = Op::kHello;
  hello.version = kFastPathVersion;
  EXPECT_EQ(raw_call(fd, hello).status, FrameStatus::kOk);
  Request get;
  get.op = Op::kGet;
  get.key = key;
  EXPECT_EQ(raw_call(fd, get).status, FrameStatus::kOk);
  Request start;
  start.op = Op::kPutStart;
  start.key = key_of(digest_of(2, 2));
  start.length = 8192;
  EXPECT_EQ(raw_call(fd, start).status, FrameStatus::kOk);
  const Response third = raw_call(fd, get);
  EXPECT_EQ(third.status, FrameStatus::kBusy);
  EXPECT_NE(third.message.find("max_handles_per_connection"), std::string::npos) << third.message;
  EXPECT_GT(app.store()->stats().pins_active, 0u);
  ::close(fd);  // neither RELEASE nor PUT_END: the daemon drops both
  EXPECT_TRUE(testing::wait_until([&] { return app.store()->stats().pins_active == 0; }, 10s));
  auto lc = LocalClient::connect(dir.file("kv.sock"));
  ASSERT_TRUE(lc.ok());
  std::vector<uint8_t> out(8192);
  auto half = (*lc)->get(key_of(digest_of(2, 2)), out);
  ASSERT_FALSE(half.ok()) << "a put whose connection closed before PUT_END is never visible";
  EXPECT_EQ(half.error().code, ClientError::kNotFound);

  // Connections are bounded: with two open, a third is refused with BUSY.
  auto other = LocalClient::connect(dir.file("kv.sock"));
  ASSERT_TRUE(other.ok());
  auto refused = LocalClient::connect(dir.file("kv.sock"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ClientError::kBusy) << refused.error().message;
  EXPECT_NE(refused.error().message.find("max_connections"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace cgn::kvcached
