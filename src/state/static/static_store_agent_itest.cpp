// The static backend over a real cgn-agent: a [[router.nodes]] entry with an agent address is
// polled through Agent.Health (gRPC) and its node record becomes the node's update, while the
// data path stays the configured URL. The agent runs cgn-engine-sim symlinked as `vllm`.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "state/static/agent_health_client.h"
#include "state/static/static_store.h"
#include "testing/process.h"

namespace cgn::state {
namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;

struct Events {
  std::mutex mu;
  std::vector<cluster::NodeEvent> all;
  void add(const cluster::NodeEvent& e) {
    std::lock_guard lock(mu);
    all.push_back(e);
  }
  std::optional<cluster::NodeEvent> last() {
    std::lock_guard lock(mu);
    if (all.empty()) {
      return std::nullopt;
    }
    return all.back();
  }
};

TEST(StaticStoreAgent, polls_the_agents_health_for_the_node_record) {
  TempDir dir;
  const std::string sim = cgn::testing::bin_path("cgn-engine-sim");
  ASSERT_EQ(::access(sim.c_str(), X_OK), 0) << sim;
  ASSERT_EQ(::symlink(sim.c_str(), dir.file("vllm").c_str()), 0);
  const int engine_port = cgn::testing::free_port();
  const int http_port = cgn::testing::free_port();
  const std::string cfg = dir.file("cognitora.toml");
  cgn::testing::write_file(
      cfg, "[agent]\nnode_id = \"agent-a\"\nlisten = \"127.0.0.1:" + std::to_string(http_port) +
               "\"\ngrpc_listen = \"127.0.0.1:0\"\nscrape_interval_ms = 50\n"
               "probe_interval_ms = 20\n\n[engine]\nkind = \"vllm\"\nmodel = \"sim/model\"\n"
               "role = \"prefill\"\nport = " +
               std::to_string(engine_port) +
               "\nextra_args = [\"--num-gpu-blocks-override\", \"2048\", "
               "\"--block-size\", \"16\", \"--sim-load-seconds\", \"0.3\"]\n");
  const char* path = std::getenv("PATH");
  Process agent(
      {cgn::testing::bin_path("cgn-agent"), "--config", cfg, "--grpc-port-file", dir.file("grpc.port")},
      {{"PATH", dir.path() + ":" + (path ? path : "/usr/bin:/bin")}});
  const int grpc_port = cgn::testing::wait_for_port_file(dir.file("grpc.port"), agent, 20s);
  ASSERT_GT(grpc_port, 0) << agent.describe() << "\n" << agent.log();

  StaticStoreOptions o;
  const std::string url = "http://127.0.0.1:" + std::to_string(http_port);
  // Configured as a bare "both" node with no models: the record's role and models win.
  o.nodes.push_back(StaticNodeSpec{
      "a", url, routing::NodeRole::kBoth, {}, "vllm", "127.0.0.1:" + std::to_string(grpc_port)});
  o.interval = 50ms;
  o.poll_timeout = 1000ms;
  auto store = StaticStore::create(o);
  ASSERT_TRUE(store.ok()) << store.error().message;
  Events events;
  ASSERT_TRUE((*store)->start([&](const cluster::NodeEvent& e) { events.add(e); }).ok());

  ASSERT_TRUE(wait_until(
      [&] {
        auto e = events.last();
        return e && e->update.health == routing::Health::kHealthy && e->update.total_blocks == 2048u;
      },
      30s))
      << agent.log();
  cluster::NodeEvent e = *events.last();
  EXPECT_EQ(e.id, "a");
  EXPECT_EQ(e.endpoint.port, http_port);  // requests go to the agent's HTTP endpoint
  EXPECT_EQ(e.update.address, url);
  EXPECT_EQ(e.update.role, routing::NodeRole::kPrefill);
  ASSERT_TRUE(e.update.models.has_value());
  EXPECT_EQ(*e.update.models, std::vector<std::string>{"sim/model"});
  EXPECT_EQ(e.update.engine, "vllm");
  EXPECT_EQ(e.update.free_blocks, 2048u);
  EXPECT_EQ(e.update.block_size_tokens, 16u);
  ASSERT_TRUE(e.update.kv_epoch.has_value());
  EXPECT_NE(*e.update.kv_epoch, 0u);

  // The agent dies: the node turns unhealthy within a few polls.
  agent.signal(SIGKILL);
  ASSERT_TRUE(wait_until(
      [&] {
        auto last = events.last();
        return last && last->update.health == routing::Health::kUnhealthy;
      },
      10s));
  (*store)->stop();
}

// A router's health channel left idle while its agent restarts on the same gRPC port: the next
// check is answered by the new agent, not failed on the connection the old one closed (which
// would report a healthy node down for one poll). The client's completion-queue thread sees the
// old connection close; this keeps it so.
TEST(StaticStoreAgent, the_first_health_check_after_an_agent_restart_is_answered) {
  TempDir dir;
  const std::string sim = cgn::testing::bin_path("cgn-engine-sim");
  ASSERT_EQ(::symlink(sim.c_str(), dir.file("vllm").c_str()), 0);
  const int grpc_port = cgn::testing::free_port();
  const std::string cfg = dir.file("cognitora.toml");
  cgn::testing::write_file(cfg, "[agent]\nnode_id = \"agent-r\"\nlisten = \"127.0.0.1:" +
                                    std::to_string(cgn::testing::free_port()) +
                                    "\"\ngrpc_listen = \"127.0.0.1:" + std::to_string(grpc_port) +
                                    "\"\n\n[engine]\nkind = \"vllm\"\nmodel = \"m\"\nport = " +
                                    std::to_string(cgn::testing::free_port()) + "\n");
  const char* path = std::getenv("PATH");
  const auto start = [&] {
    ::unlink(dir.file("grpc.port").c_str());
    auto agent = std::make_unique<Process>(
        std::vector<std::string>{cgn::testing::bin_path("cgn-agent"), "--config", cfg, "--grpc-port-file",
                                 dir.file("grpc.port")},
        std::map<std::string, std::string>{{"PATH", dir.path() + ":" + (path ? path : "/usr/bin:/bin")}});
    EXPECT_EQ(cgn::testing::wait_for_port_file(dir.file("grpc.port"), *agent, 20s), grpc_port)
        << agent->log();
    return agent;
  };
  boost::asio::io_context ctx;
  auto work = boost::asio::make_work_guard(ctx);
  std::thread runner([&] { ctx.run(); });
  AgentHealthClients clients(ctx);
  clients.add(0, "127.0.0.1:" + std::to_string(grpc_port));
  const auto check = [&] {
    std::promise<Result<cluster::AgentHealth, std::string>> answer;
    boost::asio::co_spawn(
        ctx,
        [&]() -> boost::asio::awaitable<void> {
          auto r = co_await clients.health(0, 5000ms);
          answer.set_value(std::move(r));
        },
        boost::asio::detached);
    return answer.get_future().get();
  };
  auto agent = start();
  for (int restart = 0; restart < 3; ++restart) {
    auto before = check();
    ASSERT_TRUE(before.ok()) << before.error().message;
    ASSERT_EQ(agent->stop(10s), 0) << agent->log();
    agent = start();
    auto after = check();
    EXPECT_TRUE(after.ok()) << "restart " << restart << ": " << after.error().message;
  }
  clients.shutdown();
  work.reset();
  runner.join();
}

TEST(StaticStoreAgent, an_agent_address_without_a_port_is_a_config_error) {
  StaticStoreOptions o;
  o.nodes.push_back(
      StaticNodeSpec{"a", "http://127.0.0.1:9090", routing::NodeRole::kBoth, {}, "vllm", "agent-host"});
  auto store = StaticStore::create(o);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("is not HOST:PORT"), std::string::npos) << store.error().message;
}

TEST(StaticStoreAgent, stop_returns_while_an_agent_does_not_answer) {
  // A listening socket that never accepts nor speaks HTTP/2: each Health call hangs until its
  // deadline; the node is unhealthy and stop() cancels the call in flight.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  StaticStoreOptions o;
  o.nodes.push_back(StaticNodeSpec{"a",
                                   "http://127.0.0.1:9",
                                   routing::NodeRole::kBoth,
                                   {},
                                   "vllm",
                                   "127.0.0.1:" + std::to_string(ntohs(addr.sin_port))});
  o.interval = 20ms;
  o.poll_timeout = 200ms;
  auto store = StaticStore::create(o);
  ASSERT_TRUE(store.ok());
  Events events;
  ASSERT_TRUE((*store)->start([&](const cluster::NodeEvent& e) { events.add(e); }).ok());
  ASSERT_TRUE(wait_until([&] { return (*store)->polls_completed() >= 2; }, 10s));
  auto last = events.last();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->update.health, routing::Health::kUnhealthy);
  (*store)->stop();
  ::close(fd);
}

}  // namespace
}  // namespace cgn::state
