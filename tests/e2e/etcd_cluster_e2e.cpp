// The etcd state backend end to end: a real etcd, the cgn-router binary with state_backend = "etcd", and two
// cgn-agent processes, each spawning cgn-engine-sim through a wrapper named like the engine
// (`vllm`, `llama-server`) and publishing its node record and live KV prefixes on a lease.
// Routing is observed through X-CGN-Node; every wait polls with a deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "router/etcd_testing.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/keys.h"
#include "testing/etcd_server.h"
#include "testing/metrics_page.h"
#include "testing/process.h"

namespace cgn {
namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;
using router::etcdtest::body_digests;
using router::etcdtest::chat_body;
using router::etcdtest::http_call;
using router::etcdtest::long_prompt;

using cgn::testing::metric;

using cgn::testing::children_of;

constexpr int kLeaseTtlS = 3;
constexpr int kPublishMs = 250;

struct Agent {
  std::string id;
  uint16_t port = 0;            // data path
  uint16_t engine_port = 0;     // the simulator
  uint16_t kv_events_port = 0;  // the simulator's KV events (vllm only; 0 = off)
  std::unique_ptr<Process> proc;
};

class EtcdCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.start()) << etcd_.log();
    etcd::EtcdClientOptions co;
    co.endpoints = {etcd_.admin_endpoint()};
    auto c = etcd::EtcdClient::create(co);
    ASSERT_TRUE(c.ok()) << c.error().message;
    admin_ = *c;
    for (const char* name : {"vllm", "llama-server"}) {
      ASSERT_EQ(::symlink(cgn::testing::bin_path("cgn-engine-sim").c_str(), dir_.file(name).c_str()), 0);
    }
    start_agent("a", "vllm");
    start_agent("b", "llamacpp");
    start_router();
    ASSERT_TRUE(wait_until([&] { return nodes_up() == 2; }, 30s)) << router_->log() << agents_[0].proc->log();
  }

  void start_agent(const std::string& id, const std::string& kind) {
    Agent a;
    a.id = id;
    a.port = static_cast<uint16_t>(cgn::testing::free_port());
    a.engine_port = static_cast<uint16_t>(cgn::testing::free_port());
    // vLLM publishes KV events (the simulator behind the `vllm` wrapper does too); llama.cpp cannot.
    std::string kv_events;
    if (kind == "vllm") {
      a.kv_events_port = static_cast<uint16_t>(cgn::testing::free_port());
      kv_events = "kv_events = true\nkv_events_port = " + std::to_string(a.kv_events_port) + "\n";
    }
    const std::string cfg = dir_.file("agent-" + id + ".toml");
    cgn::testing::write_file(
        cfg, "[agent]\nnode_id = \"" + id + "\"\nlisten = \"127.0.0.1:" + std::to_string(a.port) +
                 "\"\ngrpc_listen = \"127.0.0.1:0\"\nstate_backend = \"etcd\"\n"
                 "publish_interval_ms = " +
                 std::to_string(kPublishMs) + "\n[engine]\nkind = \"" + kind +
                 "\"\nmodel = \"m\"\nserved_name = \"m\"\nport = " + std::to_string(a.engine_port) +
                 "\nextra_args = [\"--sim-time-scale\", \"0.01\", \"--sim-enable-admin\"]\n" + kv_events +
                 "[state.etcd]\nendpoints = "
                 "[\"http://" +
                 etcd_.endpoint() + "\"]\nlease_ttl_s = " + std::to_string(kLeaseTtlS) + "\n");
    const char* path = std::getenv("PATH");
    a.proc = std::make_unique<Process>(
        std::vector<std::string>{cgn::testing::bin_path("cgn-agent"), "--config", cfg},
        std::map<std::string, std::string>{
            {"PATH", dir_.path() + ":" + (path != nullptr ? path : "/usr/bin:/bin")}});
    agents_.push_back(std::move(a));
  }

  void start_router() {
    const std::string pf = dir_.file("router.port");
    ::unlink(pf.c_str());
    router_ = std::make_unique<Process>(
        std::vector<std::string>{cgn::testing::bin_path("cgn-router"), "--listen", "127.0.0.1:0", "--etcd",
                                 "http://" + etcd_.endpoint(), "--port-file", pf, "--threads", "2"});
    const int p = cgn::testing::wait_for_port_file(pf, 20s);
    ASSERT_GT(p, 0) << router_->log();
    port_ = static_cast<uint16_t>(p);
  }

  std::string metrics() { return http_call(port_, "GET", "/metrics", "").body; }
  int nodes_up() {
    const std::string m = metrics();
    int n = 0;
    for (size_t pos = 0; (pos = m.find("\ncgn_cluster_node_up{", pos)) != std::string::npos; ++pos) {
      const size_t eol = m.find('\n', pos + 1);
      n += m.compare(eol - 2, 2, " 1") == 0 ? 1 : 0;
    }
    return n;
  }
  router::etcdtest::HttpReply chat(const std::string& body) {
    return http_call(port_, "POST", "/v1/chat/completions", body);
  }
  // How many of `digests` node `id` has published.
  size_t published(const std::string& id, const std::vector<Digest>& digests) {
    size_t n = 0;
    for (const auto& d : digests) {
      auto r = admin_->get(etcd::keys::kv_key(id, d));
      n += (r.ok() && !r->kvs.empty()) ? 1 : 0;
    }
    return n;
  }
  std::optional<cluster::NodeRecord> record(const std::string& id) {
    auto r = admin_->get(etcd::keys::node_key(id));
    if (!r.ok() || r->kvs.empty()) {
      return std::nullopt;
    }
    auto rec = cluster::parse_node_record(r->kvs[0].value);
    return rec.ok() ? std::optional<cluster::NodeRecord>(*rec) : std::nullopt;
  }
  Agent& agent(const std::string& id) { return agents_[id == "a" ? 0 : 1]; }
  std::string other(const std::string& id) { return id == "a" ? "b" : "a"; }

  // Sends `body` once and waits until the serving agent published all its digests.
  std::string seed(const std::string& body) {
    auto r = chat(body);
    EXPECT_EQ(r.status, 200u) << r.body;
    const auto d = body_digests(body);
    EXPECT_TRUE(wait_until([&] { return published(r.node, d) == d.size(); }, 5s)) << r.node;
    return r.node;
  }

  TempDir dir_;
  cgn::testing::EtcdServer etcd_;
  std::shared_ptr<etcd::EtcdClient> admin_;
  std::vector<Agent> agents_;
  std::unique_ptr<Process> router_;
  uint16_t port_ = 0;
};

TEST_F(EtcdCluster, AffinityFromLivePrefixesSurvivesARouterRestart) {
  std::vector<std::pair<std::string, std::string>> seeded;  // body, node
  for (int i = 0; i < 4; ++i) {
    const std::string body = chat_body("m", long_prompt("affinity" + std::to_string(i)));
    seeded.emplace_back(body, seed(body));
  }
  // A new router has no optimistic entries: only etcd's live prefixes can route these.
  router_->stop();
  start_router();
  ASSERT_TRUE(wait_until([&] { return nodes_up() == 2; }, 10s));
  for (int round = 0; round < 2; ++round) {
    for (const auto& [body, node] : seeded) {
      auto r = chat(body);
      ASSERT_EQ(r.status, 200u);
      EXPECT_EQ(r.node, node);
    }
  }
}

// The engine behind agent "a" (vllm) publishes KV events; its agent withdraws what the engine
// evicted (docs/agent.md "KV events"). Evict-all is exact (AllBlocksCleared withdraws every key).
TEST_F(EtcdCluster, ForcedEvictionOnTheEngineStopsThePreferenceWithinOnePublishInterval) {
  std::string body;
  for (int i = 0; i < 12 && body.empty(); ++i) {
    const std::string b = chat_body("m", long_prompt("evict" + std::to_string(i)));
    if (seed(b) == "a") {
      body = b;
    }
  }
  ASSERT_FALSE(body.empty()) << "no prompt was routed to node a";
  const auto d = body_digests(body);
  // The router credits node a with the whole prompt now (its confirmed and optimistic entries).
  double entries_before = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        entries_before = metric(metrics(), "cgn_router_prefix_index_entries");
        return entries_before >= static_cast<double>(d.size());
      },
      5s))
      << entries_before;
  auto ev = http_call(agent("a").engine_port, "POST", "/admin/evict", R"({"all":true})");
  ASSERT_EQ(ev.status, 200u) << ev.body;
  const auto t0 = std::chrono::steady_clock::now();
  // AllBlocksCleared -> the agent's next flush (one publish interval) deletes its KV keys.
  const bool gone = wait_until([&] { return published("a", d) == 0; }, 5s);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "[measured] forced eviction (all) -> prefixes withdrawn from etcd: %.0f ms (publish interval %d ms)\n",
      ms, kPublishMs);
  ASSERT_TRUE(gone) << "the agent did not withdraw prefixes the engine evicted\n" << agent("a").proc->log();
  // Lands at a flush: idle, one publish interval plus the event's trip (250-270 ms). The bound,
  // a few flushes (~5.5x the idle value), holds on a loaded 2-core runner.
  EXPECT_LE(ms, 4.0 * kPublishMs + 500.0);
  // The router follows the deletions: a withdrawn key drops the node's entry, optimistic or
  // confirmed, so the index shrinks by at least the prompt's digests ...
  const bool dropped = wait_until(
      [&] {
        return metric(metrics(), "cgn_router_prefix_index_entries") <=
               entries_before - static_cast<double>(d.size());
      },
      5s);
  const double router_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[measured] forced eviction (all) -> router index no longer holds the prompt: %.0f ms\n",
              router_ms);
  ASSERT_TRUE(dropped) << metrics();
  // ... and the next request for that prompt finds no overlap anywhere: node a is no longer preferred.
  const double overlap_before = metric(metrics(), "cgn_router_prefix_overlap_ratio_sum");
  auto probe = chat(body);
  ASSERT_EQ(probe.status, 200u) << probe.body;
  EXPECT_LT(metric(metrics(), "cgn_router_prefix_overlap_ratio_sum") - overlap_before, 0.01);
  // The node keeps serving, and publishes again what it caches next.
  const std::string again = seed(body);
  EXPECT_FALSE(again.empty());
}

// Evicting one prompt's blocks (BlockRemoved) withdraws the oldest published digests covering them:
// with only that prompt published on the node, that is the prompt itself (the LRU approximation).
TEST_F(EtcdCluster, EvictingOnePromptOnTheEngineWithdrawsItsOldestDigests) {
  std::string body;
  for (int i = 0; i < 12 && body.empty(); ++i) {
    const std::string b = chat_body("m", long_prompt("evict-one" + std::to_string(i)));
    if (seed(b) == "a") {
      body = b;
    }
  }
  ASSERT_FALSE(body.empty()) << "no prompt was routed to node a";
  const auto d = body_digests(body);
  auto ev = http_call(agent("a").engine_port, "POST", "/admin/evict", body);
  ASSERT_EQ(ev.status, 200u) << ev.body;
  const auto t0 = std::chrono::steady_clock::now();
  const bool gone = wait_until([&] { return published("a", d) == 0; }, 5s);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[measured] forced eviction (one prompt, %s) -> withdrawn: %.0f ms, %zu of %zu digests left\n",
              ev.body.c_str(), ms, published("a", d), d.size());
  EXPECT_TRUE(gone);
}

TEST_F(EtcdCluster, EngineKillBumpsTheEpochAndTheRouterDropsTheNodesPrefixes) {
  const std::string body = chat_body("m", long_prompt("engine-kill"));
  const std::string node = seed(body);
  const auto d = body_digests(body);
  const auto before = record(node);
  ASSERT_TRUE(before.has_value());
  // SIGKILL the engine: the agent's child process (the simulator behind the `vllm` or
  // `llama-server` wrapper).
  const std::vector<pid_t> children = children_of(agent(node).proc->pid());
  ASSERT_FALSE(children.empty());
  for (pid_t c : children) {
    ::kill(c, SIGKILL);
  }
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = record(node);
        return r && r->kv_epoch != before->kv_epoch;
      },
      20s))
      << agent(node).proc->log();
  ASSERT_TRUE(wait_until([&] { return published(node, d) == 0; }, 5s));
  // The router follows: the node is back in routing and serves again.
  ASSERT_TRUE(wait_until([&] { return nodes_up() == 2; }, 20s));
  EXPECT_EQ(chat(body).status, 200u);
}

TEST_F(EtcdCluster, AgentSigkillRemovesTheNodeAfterItsLease) {
  const std::string body = chat_body("m", long_prompt("agent-kill"));
  const std::string node = seed(body);
  const auto t0 = std::chrono::steady_clock::now();
  agent(node).proc->signal(SIGKILL);
  ASSERT_TRUE(wait_until([&] { return !record(node).has_value(); }, std::chrono::seconds(kLeaseTtlS + 5)));
  ASSERT_TRUE(wait_until([&] { return nodes_up() == 1; }, 5s));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[measured] agent SIGKILL -> node gone from the router: %.2f s (TTL %d s, limit %d s)\n", s,
              kLeaseTtlS, kLeaseTtlS + 3);
  EXPECT_LE(s, kLeaseTtlS + 3.0);
  EXPECT_EQ(published(node, body_digests(body)), 0u);
  for (int i = 0; i < 5; ++i) {
    auto r = chat(body);
    ASSERT_EQ(r.status, 200u);
    EXPECT_EQ(r.node, other(node));
  }
}

TEST_F(EtcdCluster, CordonPolicyAndEtcdRestartMidTraffic) {
  const std::string body = chat_body("m", long_prompt("ops"));
  const std::string node = seed(body);
  // Cordon: no new traffic within 3 s; uncordon: it returns.
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(admin_->put(etcd::keys::cordon_key(node), "true").ok());
  ASSERT_TRUE(wait_until([&] { return chat(body).node == other(node); }, 3s, 5ms));
  std::printf("[measured] cordon -> no new traffic: %.1f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(chat(body).node, other(node));
  }
  ASSERT_TRUE(admin_->del(etcd::keys::cordon_key(node)).ok());
  ASSERT_TRUE(wait_until([&] { return chat(body).node == node; }, 3s, 5ms));

  // Policy: round_robin spreads the same prompt over both nodes, without a restart.
  ASSERT_TRUE(admin_->put(std::string(etcd::keys::kPolicyKey), "[router]\npolicy = \"round_robin\"\n").ok());
  ASSERT_TRUE(wait_until(
      [&] {
        std::set<std::string> s;
        for (int i = 0; i < 4; ++i) {
          s.insert(chat(body).node);
        }
        return s.size() == 2;
      },
      3s));
  ASSERT_TRUE(admin_->del(std::string(etcd::keys::kPolicyKey)).ok());
  ASSERT_TRUE(wait_until([&] { return chat(body).node == node && chat(body).node == node; }, 3s));

  // etcd stopped and restarted mid-traffic: no failed request, the records come back once.
  int ok = 0;
  int failed = 0;
  auto some = [&](int n) {
    for (int i = 0; i < n; ++i) {
      (chat(body).status == 200 ? ok : failed)++;
    }
  };
  some(10);
  etcd_.stop();
  some(20);
  ASSERT_TRUE(etcd_.start()) << etcd_.log();
  some(20);
  ASSERT_TRUE(wait_until([&] { return record("a").has_value() && record("b").has_value(); }, 15s));
  ASSERT_TRUE(wait_until([&] { return nodes_up() == 2; }, 10s));
  some(10);
  std::printf("[measured] etcd restart mid-traffic: %d ok, %d failed\n", ok, failed);
  EXPECT_EQ(failed, 0);
  auto nodes = admin_->get_prefix(std::string(etcd::keys::kNodesPrefix));
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(nodes->kvs.size(), 2u);  // no duplicate records
}

}  // namespace
}  // namespace cgn
