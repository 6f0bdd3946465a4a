// Tiered KV end to end: a real etcd, the cgn-router binary (state_backend "etcd") and three
// cgn-agents, each spawning cgn-engine-sim with kv_offload = "cgn" and a small HBM next to its own
// cgn-kvcached (RAM and SSD tiers) on a fixed loopback port. A prompt the engine evicted from HBM
// reaches its kvcached; the agent publishes it under the live-prefix key with its tier; the router
// credits the tiers (HBM 1.0 > RAM 0.75 > SSD 0.25 > nothing) and the engine loads the resident
// run instead of recomputing it (usage.prompt_tokens_details.cached_tokens). Routing is observed
// through X-CGN-Node; every wait polls with a deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cluster/kv_publish_set.h"
#include "router/etcd_testing.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/keys.h"
#include "testing/etcd_server.h"
#include "testing/metrics_page.h"
#include "testing/process.h"
// GCC 12 at -O3 reports a false -Wrestrict inside the operator+ chain of Daemon's constructor
// once inlined here (GCC PR105329); the strings do not overlap.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "kvcached/kvcached_itest_util.h"

namespace cgn {
namespace {

using namespace std::chrono_literals;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;
using router::etcdtest::body_digests;
using router::etcdtest::chat_body;
using router::etcdtest::http_call;
using router::etcdtest::HttpReply;
using router::etcdtest::long_prompt;

constexpr int kPublishMs = 250;
constexpr size_t kPromptBlocks = 16;  // 256-byte routing blocks: ~1,000 tokens, 64 engine blocks
// The engine's HBM: 200 blocks of 16 tokens, about three such prompts. kvcached's RAM tier:
// 1 MiB of 4 KiB pages (the simulator puts 64 bytes a block, one page each), spilling to SSD
// above 90%: about four prompts' blocks.
constexpr const char* kSimArgs =
    R"("--time-scale", "0.01", "--num-gpu-blocks", "200", "--max-model-len", "3200", "--log-level", "warn")";
constexpr const char* kKvcachedToml = "ram_bytes = 1048576\nmax_block_bytes = 65536\n";

struct Node {
  std::string id;
  uint16_t port = 0;         // the agent's data path
  uint16_t engine_port = 0;  // its simulator
  std::unique_ptr<kvcached::itest::Daemon> kv;
  std::unique_ptr<Process> agent;
};

class KvTiers : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.start()) << etcd_.log();
    etcd::EtcdClientOptions co;
    co.endpoints = {etcd_.admin_endpoint()};
    auto c = etcd::EtcdClient::create(co);
    ASSERT_TRUE(c.ok()) << c.error().message;
    admin_ = *c;
    ASSERT_EQ(
        ::symlink(cgn::testing::bin_path("cgn-engine-sim").c_str(), dir_.file("cgn-engine-sim").c_str()), 0);
    for (const char* id : {"a", "b", "c"}) {
      start_node(id);
    }
    const std::string pf = dir_.file("router.port");
    router_ = std::make_unique<Process>(
        std::vector<std::string>{cgn::testing::bin_path("cgn-router"), "--listen", "127.0.0.1:0", "--etcd",
                                 "http://" + etcd_.endpoint(), "--port-file", pf, "--threads", "2"});
    const int p = cgn::testing::wait_for_port_file(pf, 20s);
    ASSERT_GT(p, 0) << router_->log();
    port_ = static_cast<uint16_t>(p);
    ASSERT_TRUE(wait_until([&] { return nodes_up() == 3; }, 60s)) << router_->log() << nodes_[0].agent->log();
  }

  void start_node(const std::string& id) {
    Node n;
    n.id = id;
    n.port = static_cast<uint16_t>(cgn::testing::free_port());
    n.engine_port = static_cast<uint16_t>(cgn::testing::free_port());
    const std::string kv_listen = "127.0.0.1:" + std::to_string(cgn::testing::free_port());
    n.kv = std::make_unique<kvcached::itest::Daemon>(
        dir_, "kv-" + id, std::string(kKvcachedToml) + "ssd_dir = \"" + dir_.file("ssd-" + id) + "\"\n");
    n.kv->flags = {"--listen", kv_listen};
    ASSERT_TRUE(n.kv->start());
    const std::string cfg = dir_.file("agent-" + id + ".toml");
    cgn::testing::write_file(
        cfg, "[agent]\nnode_id = \"" + id + "\"\nlisten = \"127.0.0.1:" + std::to_string(n.port) +
                 "\"\ngrpc_listen = \"127.0.0.1:0\"\nstate_backend = \"etcd\"\npublish_interval_ms = " +
                 std::to_string(kPublishMs) +
                 "\n[engine]\nkind = \"sim\"\nmodel = \"m\"\nserved_name = \"m\"\nport = " +
                 std::to_string(n.engine_port) +
                 "\nkv_offload = \"cgn\"\nkv_events = true\nkv_events_port = " +
                 std::to_string(cgn::testing::free_port()) + "\nextra_args = [" + kSimArgs +
                 "]\n[kvcached]\nlisten = \"" + kv_listen + "\"\nsocket = \"" + n.kv->socket() +
                 "\"\n[state.etcd]\nendpoints = [\"http://" + etcd_.endpoint() + "\"]\nlease_ttl_s = 3\n");
    const char* path = std::getenv("PATH");
    n.agent = std::make_unique<Process>(
        std::vector<std::string>{cgn::testing::bin_path("cgn-agent"), "--config", cfg},
        std::map<std::string, std::string>{
            {"PATH", dir_.path() + ":" + (path != nullptr ? path : "/usr/bin:/bin")}},
        dir_.file("agent-" + id + ".log"));
    nodes_.push_back(std::move(n));
  }

  int nodes_up() {
    const std::string m = http_call(port_, "GET", "/metrics", "").body;
    int n = 0;
    for (size_t pos = 0; (pos = m.find("\ncgn_cluster_node_up{", pos)) != std::string::npos; ++pos) {
      const size_t eol = m.find('\n', pos + 1);
      n += m.compare(eol - 2, 2, " 1") == 0 ? 1 : 0;
    }
    return n;
  }
  Node& node(const std::string& id) {
    for (Node& n : nodes_) {
      if (n.id == id) {
        return n;
      }
    }
    ADD_FAILURE() << "no node " << id;
    return nodes_[0];
  }

  // How many of `digests` node `id` publishes as held in `tier`.
  size_t published_in(const std::string& id, const std::vector<Digest>& digests, routing::Tier tier) {
    size_t n = 0;
    for (const auto& d : digests) {
      auto r = admin_->get(etcd::keys::kv_key(id, d));
      if (r.ok() && !r->kvs.empty()) {
        auto v = cluster::parse_kv_prefix_value(r->kvs[0].value);
        n += (v.ok() && v->tier == tier) ? 1 : 0;
      }
    }
    return n;
  }
  // The prompt's digests in `tier`, from its first (the router credits unbroken runs from the
  // first) to all but its last (whose engine blocks may end in a partial one, never stored).
  bool all_in(const std::string& id, const std::string& body, routing::Tier tier) {
    auto d = body_digests(body);
    EXPECT_GE(d.size(), kPromptBlocks);
    d.pop_back();
    return published_in(id, d, tier) == d.size();
  }

  std::string debug(const std::string& id, const std::string& body) {
    std::string out;
    for (const auto& d : body_digests(body)) {
      auto r = admin_->get(etcd::keys::kv_key(id, d));
      out += (r.ok() && !r->kvs.empty()) ? r->kvs[0].value : std::string("-");
      out += " ";
    }
    auto rec = admin_->get(etcd::keys::node_key(id));
    out += "\nrecord: " + ((rec.ok() && !rec->kvs.empty()) ? rec->kvs[0].value : std::string("-"));
    const std::string m = http_call(port_, "GET", "/metrics", "").body;
    for (size_t at = m.find("cgn_router_prefix"); at != std::string::npos;
         at = m.find("cgn_router_prefix", at + 1)) {
      out += "\n" + m.substr(at, m.find('\n', at) - at);
    }
    return out;
  }
  // The router's index holds as many entries as etcd has live-prefix keys: it has applied what the
  // agents published (the index holds no other entries once optimistic ones are confirmed).
  bool router_caught_up() {
    auto kv = admin_->get_prefix(std::string(etcd::keys::kKvPrefix));
    const double entries =
        cgn::testing::metric(http_call(port_, "GET", "/metrics", "").body, "cgn_router_prefix_index_entries");
    return kv.ok() && entries == static_cast<double>(kv->kvs.size());
  }
  HttpReply via_router(const std::string& body) {
    return http_call(port_, "POST", "/v1/chat/completions", body);
  }
  HttpReply direct(const std::string& id, const std::string& body) {
    return http_call(node(id).port, "POST", "/v1/chat/completions", body);
  }

  // Pushes other prompts through node `id` (its HBM evicts `body`'s blocks into its kvcached, whose
  // RAM spills the oldest to SSD) until the agent publishes `body` in `tier`.
  void push_until(const std::string& id, const std::string& body, routing::Tier tier) {
    for (int i = 0; i < 40; ++i) {
      if (wait_until([&] { return all_in(id, body, tier); }, 1s, 50ms)) {
        std::printf("[measured] node %s publishes the prompt in tier %s after %d other prompts\n", id.c_str(),
                    std::string(routing::to_string(tier)).c_str(), i);
        return;
      }
      const auto r = direct(
          id, chat_body("m", long_prompt("filler-" + id + "-" + std::to_string(++fillers_), kPromptBlocks)));
      ASSERT_EQ(r.status, 200u) << r.body;
    }
    FAIL() << "node " << id << " never published the prompt in tier " << routing::to_string(tier) << ": "
           << published_in(id, body_digests(body), tier) << " of " << body_digests(body).size() << "\n"
           << node(id).agent->log();
  }

  // A series of node `id`'s simulator's /metrics (NaN when absent: never read as 0).
  double sim_metric(const std::string& id, const std::string& series) {
    return cgn::testing::metric(http_call(node(id).engine_port, "GET", "/metrics", "").body, series);
  }
  // Residency lookup rounds node `id`'s agent had answered (NaN before its first scrape shows one).
  double agent_lookups(const std::string& id) {
    return cgn::testing::metric(http_call(node(id).port, "GET", "/metrics", "").body,
                                R"(cgn_agent_kv_residency_lookups_total{outcome="ok"})");
  }
  double loaded_from(const std::string& id, const std::string& tier) {
    return sim_metric(
        id, R"(cgn_sim:kv_offload_loaded_tokens_total{engine="0",model_name="m",tier=")" + tier + "\"}");
  }

  TempDir dir_;
  cgn::testing::EtcdServer etcd_;
  std::shared_ptr<etcd::EtcdClient> admin_;
  std::vector<Node> nodes_;
  std::unique_ptr<Process> router_;
  uint16_t port_ = 0;
  int fillers_ = 0;
};

int cached_tokens(const HttpReply& r) {
  const auto j = nlohmann::json::parse(r.body, nullptr, false);
  const auto* v = j.is_object() ? &j["usage"]["prompt_tokens_details"]["cached_tokens"] : nullptr;
  return v != nullptr && v->is_number_integer() ? v->get<int>() : -1;
}
int prompt_tokens(const HttpReply& r) {
  const auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_object() && j["usage"]["prompt_tokens"].is_number_integer()
             ? j["usage"]["prompt_tokens"].get<int>()
             : -1;
}

// (a) and (b): a prompt evicted from its node's HBM into kvcached's RAM tier is routed back there
// and served with more of it cached than anywhere else; spilled to SSD and kvcached restarted,
// the SSD tier still routes and serves it.
TEST_F(KvTiers, EvictedPromptComesBackFromRamAndFromSsdAfterAKvcachedRestart) {
  const std::string body = chat_body("m", long_prompt("tiered", kPromptBlocks));
  const HttpReply first = via_router(body);
  ASSERT_EQ(first.status, 200u) << first.body;
  const std::string x = first.node;
  EXPECT_EQ(cached_tokens(first), 0);
  push_until(x, body, routing::Tier::kRam);
  ASSERT_TRUE(wait_until([&] { return router_caught_up(); }, 10s));
  const HttpReply ram = via_router(body);
  ASSERT_EQ(ram.status, 200u) << ram.body;
  EXPECT_EQ(ram.node, x) << "the node whose RAM tier holds the prompt was not preferred\n" << debug(x, body);
  const int prompt = prompt_tokens(ram);
  std::printf("[measured] %d-token prompt from %s's RAM tier: %d tokens cached (HBM + loaded)\n", prompt,
              x.c_str(), cached_tokens(ram));
  EXPECT_GT(cached_tokens(ram), prompt / 2);
  EXPECT_GT(loaded_from(x, "ram"), 0) << "nothing was loaded from the RAM tier\n"
                                      << http_call(node(x).engine_port, "GET", "/metrics", "").body;

  // Spill it to SSD (the engine evicts it again, kvcached's RAM fills), then restart kvcached: its
  // RAM is gone, its SSD segments are scanned back.
  push_until(x, body, routing::Tier::kSsd);
  Node& n = node(x);
  ASSERT_EQ(n.kv->stop(), 0);
  ASSERT_TRUE(n.kv->start());
  // The daemon answers while it scans its SSD segments back (a block not scanned yet is not
  // resident): wait for the scan, as an operator would (cgn_kvcached_scan_complete).
  ASSERT_TRUE(wait_until(
      [&] {
        return cgn::testing::metric(kvcached::itest::scrape(n.kv->metrics_port()),
                                    "cgn_kvcached_scan_complete") == 1;
      },
      60s))
      << n.kv->log();
  const std::string scanned = kvcached::itest::scrape(n.kv->metrics_port());
  EXPECT_GE(cgn::testing::metric(scanned, R"(cgn_kvcached_blocks{tier="ssd"})"), kPromptBlocks * 4)
      << scanned;
  EXPECT_EQ(cgn::testing::metric(scanned, R"(cgn_kvcached_blocks{tier="ram"})"), 0) << scanned;
  // A lookup round that began before the scan ended may have withdrawn the prompt: two more
  // answered rounds (the second began after the scan) and the agent publishes it again.
  const double rounds = agent_lookups(x);
  ASSERT_TRUE(wait_until([&] { return agent_lookups(x) >= rounds + 2; }, 15s)) << n.agent->log();
  ASSERT_TRUE(wait_until([&] { return all_in(x, body, routing::Tier::kSsd); }, 15s)) << n.agent->log();
  ASSERT_TRUE(wait_until([&] { return router_caught_up(); }, 10s));
  // The engine's channel to the restarted daemon reconnects on its own (at most a second apart).
  ASSERT_TRUE(wait_until(
      [&] {
        return cgn::testing::metric(http_call(n.engine_port, "GET", "/metrics", "").body,
                                    R"(cgn_sim:kv_offload_up{engine="0",model_name="m"})") == 1;
      },
      10s))
      << http_call(n.engine_port, "GET", "/metrics", "").body;
  const double ssd_before = loaded_from(x, "ssd");
  const HttpReply ssd = via_router(body);
  ASSERT_EQ(ssd.status, 200u) << ssd.body;
  EXPECT_EQ(ssd.node, x) << "the node whose SSD tier holds the prompt was not preferred";
  std::printf("[measured] the same prompt from %s's SSD tier after a kvcached restart: %d tokens cached\n",
              x.c_str(), cached_tokens(ssd));
  EXPECT_GT(cached_tokens(ssd), prompt / 2)
      << "kvcached:\n"
      << n.kv->log() << "\nkvcached /metrics:\n"
      << kvcached::itest::scrape(n.kv->metrics_port()) << "\nagent and engine:\n"
      << n.agent->log() << "\n"
      << debug(x, body);
  EXPECT_GT(loaded_from(x, "ssd"), ssd_before) << "nothing was loaded from the SSD tier\n"
                                               << http_call(n.engine_port, "GET", "/metrics", "").body;

  // Any other node recomputes it.
  for (const Node& other : nodes_) {
    if (other.id == x) {
      continue;
    }
    const HttpReply r = direct(other.id, body);
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_LT(cached_tokens(r), cached_tokens(ram)) << other.id;
    EXPECT_LT(cached_tokens(r), cached_tokens(ssd)) << other.id;
  }
}

// (c) the credit order: SSD on one node, RAM on another, nothing on the third: the RAM node wins;
// once it holds the prompt in HBM again, it beats a node whose RAM tier holds it.
TEST_F(KvTiers, RouterPrefersHbmOverRamOverSsdOverNothing) {
  const std::string body = chat_body("m", long_prompt("order", kPromptBlocks));
  ASSERT_EQ(direct("c", body).status, 200u);
  push_until("c", body, routing::Tier::kSsd);
  ASSERT_EQ(direct("b", body).status, 200u);
  push_until("b", body, routing::Tier::kRam);
  ASSERT_TRUE(all_in("c", body, routing::Tier::kSsd));
  ASSERT_TRUE(wait_until([&] { return router_caught_up(); }, 10s));
  const HttpReply ram = via_router(body);
  ASSERT_EQ(ram.status, 200u) << ram.body;
  EXPECT_EQ(ram.node, "b") << "RAM (b) should beat SSD (c) and nothing (a)";

  // b holds it in HBM now; a gets it in RAM only.
  ASSERT_TRUE(
      wait_until([&] { return published_in("b", body_digests(body), routing::Tier::kEngine) > 0; }, 5s));
  ASSERT_EQ(direct("a", body).status, 200u);
  push_until("a", body, routing::Tier::kRam);
  ASSERT_TRUE(all_in("b", body, routing::Tier::kEngine));
  ASSERT_TRUE(wait_until([&] { return router_caught_up(); }, 10s));
  const HttpReply hbm = via_router(body);
  ASSERT_EQ(hbm.status, 200u) << hbm.body;
  EXPECT_EQ(hbm.node, "b") << "HBM (b) should beat RAM (a) and SSD (c)";
}

}  // namespace
}  // namespace cgn
