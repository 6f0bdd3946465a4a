// The router's etcd backend against a real etcd (src/testing/etcd_server.h) and real
// cgn-engine-sim processes: the test writes the keys an agent would (node records, live KV
// prefixes) and an operator would (cordon, policy), and watches where the gateway sends
// requests (X-CGN-Node). Every wait polls with a deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>

#include "router/etcd_testing.h"
#include "router/fake_engine.h"
#include "router/gateway.h"
#include "router/state_backend.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/itest_util.h"
#include "state/etcd/keys.h"
#include "testing/etcd_server.h"
#include "testing/metrics_page.h"

namespace cgn::router {
namespace {

using namespace std::chrono_literals;
using cgn::testing::wait_until;
using etcdtest::body_digests;
using etcdtest::chat_body;
using etcdtest::http_call;
using etcdtest::long_prompt;
using etcdtest::record_json;
using etcdtest::Sim;

using cgn::testing::metric;
using etcd::itest::reconnected;

class EtcdBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.start()) << etcd_.log();
    etcd::EtcdClientOptions co;
    co.endpoints = {etcd_.admin_endpoint()};
    auto c = etcd::EtcdClient::create(co);
    ASSERT_TRUE(c.ok()) << c.error().message;
    admin_ = *c;
    a_ = std::make_unique<Sim>("m");
    b_ = std::make_unique<Sim>("m");
    ASSERT_TRUE(a_->wait_ready()) << a_->process().log();
    ASSERT_TRUE(b_->wait_ready()) << b_->process().log();
  }

  void start_gateway(const std::string& policy = "kv",
                     uint32_t max_staleness_ms = config::RoutingConfig{}.max_staleness_ms,
                     uint32_t passive_retry_ms = config::TimeoutsConfig{}.passive_retry_ms) {
    config::CognitoraConfig cfg;
    cfg.router.listen = "127.0.0.1:0";
    cfg.router.policy = policy;
    cfg.router.routing.max_staleness_ms = max_staleness_ms;
    cfg.router.timeouts.passive_retry_ms = passive_retry_ms;
    cfg.router.state_backend = "etcd";
    cfg.state.etcd.endpoints = {"http://" + etcd_.endpoint()};
    auto store = make_state_store(cfg, 1000ms);
    ASSERT_TRUE(store.ok()) << store.error().message;
    GatewayOptions go;
    go.router = cfg.router;
    go.threads = 2;
    gateway_ = std::make_unique<Gateway>(go, std::move(*store), ApiKeys{});
    auto port = gateway_->start();
    ASSERT_TRUE(port.ok()) << port.error().message;
    port_ = *port;
  }

  void put(const std::string& key, const std::string& value, int64_t lease = 0) {
    auto r = admin_->put(key, value, lease);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  void del(const std::string& key) {
    auto r = admin_->del(key);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  void publish(const std::string& node, const std::vector<Digest>& digests, int64_t lease = 0) {
    std::vector<etcd::TxnOp> ops;
    for (const auto& d : digests) {
      ops.push_back(etcd::TxnOp::put(etcd::keys::kv_key(node, d), "", lease));
    }
    auto r = admin_->apply_batch(ops);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  void unpublish(const std::string& node, const std::vector<Digest>& digests) {
    std::vector<etcd::TxnOp> ops;
    for (const auto& d : digests) {
      ops.push_back(etcd::TxnOp::del(etcd::keys::kv_key(node, d)));
    }
    auto r = admin_->apply_batch(ops);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  void add_nodes() {
    put("/cognitora/nodes/a", record_json("a", a_->port()));
    put("/cognitora/nodes/b", record_json("b", b_->port()));
    ASSERT_TRUE(wait_until([&] { return gateway_->healthy_nodes() == 2; }, 5s));
  }
  etcdtest::HttpReply chat(const std::string& body) {
    return http_call(port_, "POST", "/v1/chat/completions", body);
  }
  std::string metrics() { return gateway_->render_metrics(); }

  cgn::testing::EtcdServer etcd_;
  std::shared_ptr<etcd::EtcdClient> admin_;
  std::unique_ptr<Sim> a_;
  std::unique_ptr<Sim> b_;
  std::unique_ptr<Gateway> gateway_;
  uint16_t port_ = 0;
};

TEST_F(EtcdBackend, NodesAppearAndVanishWithTheirKeysAndLease) {
  start_gateway();
  EXPECT_EQ(gateway_->known_nodes(), 0u);
  add_nodes();
  std::set<std::string> served;
  for (int i = 0; i < 20 && served.size() < 2; ++i) {
    auto r = chat(chat_body("m", "hello " + std::to_string(i)));
    ASSERT_EQ(r.status, 200u) << r.body;
    served.insert(r.node);
  }
  EXPECT_EQ(served, (std::set<std::string>{"a", "b"}));

  del("/cognitora/nodes/a");
  ASSERT_TRUE(wait_until([&] { return gateway_->known_nodes() == 1; }, 5s));
  for (int i = 0; i < 5; ++i) {
    auto r = chat(chat_body("m", "after " + std::to_string(i)));
    ASSERT_EQ(r.status, 200u);
    EXPECT_EQ(r.node, "b");
  }
  // On a lease: revoking it (an agent gone) removes the node.
  auto lease = admin_->lease_grant(30);
  ASSERT_TRUE(lease.ok());
  put("/cognitora/nodes/a", record_json("a", a_->port()), lease->id);
  ASSERT_TRUE(wait_until([&] { return gateway_->healthy_nodes() == 2; }, 5s));
  ASSERT_TRUE(admin_->lease_revoke(lease->id).ok());
  ASSERT_TRUE(wait_until([&] { return gateway_->known_nodes() == 1; }, 5s));
  // A malformed record is ignored.
  put("/cognitora/nodes/c", "{broken");
  put("/cognitora/nodes/d", record_json("d", b_->port()));
  ASSERT_TRUE(wait_until([&] { return gateway_->known_nodes() == 2; }, 5s));
  EXPECT_EQ(metric(metrics(), "cgn_router_state_backend_up{backend=\"etcd\"}"), 1.0);
  EXPECT_GT(metric(metrics(), "cgn_router_state_events_total{backend=\"etcd\",kind=\"upsert\"}"), 0.0);
}

// Agents rewrite their record only when its content changes, and lease keep-alives make no watch
// event: an idle node's record grows old while the node is alive. It stays in routing as long as
// the record is there; the lease's expiry (a delete) is what takes it out.
TEST_F(EtcdBackend, AnIdleClusterKeepsServingPastMaxStaleness) {
  start_gateway("kv", 300);
  auto lease = admin_->lease_grant(60);  // the agents' lease, alive for the whole test
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  put("/cognitora/nodes/a", record_json("a", a_->port()), lease->id);
  put("/cognitora/nodes/b", record_json("b", b_->port()), lease->id);
  ASSERT_TRUE(wait_until([&] { return gateway_->healthy_nodes() == 2; }, 5s));
  ASSERT_EQ(chat(chat_body("m", "before")).status, 200u);
  // The condition under test is time passing with no traffic and no record change (twice
  // max_staleness), not a wait for an event.
  std::this_thread::sleep_for(700ms);
  auto r = chat(chat_body("m", "after an idle spell"));
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(gateway_->healthy_nodes(), 2u);
  EXPECT_EQ(gateway_->stale_nodes(), 0u);
  gateway_->refresh_cluster_metrics();
  EXPECT_EQ(metric(metrics(), "cgn_cluster_node_up{node=\"a\"}"), 1.0);
  EXPECT_EQ(metric(metrics(), "cgn_cluster_node_up{node=\"b\"}"), 1.0);
  // The lease ending is what takes them out.
  ASSERT_TRUE(admin_->lease_revoke(lease->id).ok());
  ASSERT_TRUE(wait_until([&] { return gateway_->known_nodes() == 0; }, 5s));
}

// An etcd node is never polled: a node that refused one connection (an agent restarting, a
// blip) used to stay out of routing until its record changed, which on an idle node is never.
TEST_F(EtcdBackend, ANodeThatRefusedAConnectionIsTriedAgainAfterPassiveRetry) {
  const auto port = static_cast<uint16_t>(cgn::testing::free_port());
  start_gateway("round_robin", config::RoutingConfig{}.max_staleness_ms, 300);
  put("/cognitora/nodes/a", record_json("a", a_->port()));
  put("/cognitora/nodes/c", record_json("c", port));  // nothing listens there yet
  ASSERT_TRUE(wait_until([&] { return gateway_->healthy_nodes() == 2; }, 5s));
  // Round robin reaches c within a few requests; its refusal takes it out of routing.
  ASSERT_TRUE(wait_until(
      [&] {
        EXPECT_EQ(chat(chat_body("m", "refused")).status, 200u);  // failed over to a
        return gateway_->healthy_nodes() == 1;
      },
      10s));
  cgn::router::testing::FakeEngine c("c", {"m"}, "127.0.0.1", port);
  ASSERT_EQ(c.start(), port);
  // Nothing about c changes in etcd: only passive_retry_ms lets it back in.
  ASSERT_TRUE(wait_until([&] { return gateway_->healthy_nodes() == 2; }, 10s));
  ASSERT_TRUE(wait_until([&] { return chat(chat_body("m", "back")).node == "c"; }, 10s));
  EXPECT_GE(c.generations.load(), 1);
}

TEST_F(EtcdBackend, LivePrefixesSteerRoutingAndTheirDeletionMovesIt) {
  // Published before the router starts: the first full read must carry them.
  put("/cognitora/nodes/a", record_json("a", a_->port()));
  put("/cognitora/nodes/b", record_json("b", b_->port()));
  std::vector<std::string> bodies;
  for (int i = 0; i < 6; ++i) {
    bodies.push_back(chat_body("m", long_prompt("steer" + std::to_string(i))));
    publish(i % 2 == 0 ? "a" : "b", body_digests(bodies.back()));
  }
  start_gateway();
  ASSERT_TRUE(wait_until([&] { return gateway_->healthy_nodes() == 2; }, 5s));
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < bodies.size(); ++i) {
      auto r = chat(bodies[i]);
      ASSERT_EQ(r.status, 200u) << r.body;
      EXPECT_EQ(r.node, i % 2 == 0 ? "a" : "b") << "prompt " << i;
    }
  }
  // Node a evicts prompt 0 and node b now holds it: the router follows (the optimistic entries
  // on a from the requests above go with the deletes).
  const auto d0 = body_digests(bodies[0]);
  unpublish("a", d0);
  publish("b", d0);
  ASSERT_TRUE(wait_until([&] { return chat(bodies[0]).node == "b"; }, 3s));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(chat(bodies[0]).node, "b");
  }
  // A kv_epoch change on b drops what the router believed about b; prompt 1 (only on b) is
  // then no better on b than on a, and prompt 0 re-published under the new epoch is.
  put("/cognitora/nodes/b", record_json("b", b_->port(), 2));
  publish("b", d0);
  ASSERT_TRUE(wait_until([&] { return chat(bodies[0]).node == "b"; }, 3s));
}

TEST_F(EtcdBackend, CordonStopsNewTrafficWithinThreeSecondsAndUncordonReturnsIt) {
  start_gateway();
  add_nodes();
  const std::string body = chat_body("m", long_prompt("cordon"));
  publish("a", body_digests(body));
  ASSERT_TRUE(wait_until([&] { return chat(body).node == "a"; }, 3s));

  const auto t0 = std::chrono::steady_clock::now();
  put("/cognitora/cordon/a", "true");
  ASSERT_TRUE(wait_until([&] { return chat(body).node == "b"; }, 3s, 5ms));
  const double cordon_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[measured] cordon -> no new traffic on the node: %.1f ms (limit 3000 ms)\n", cordon_ms);
  EXPECT_LE(cordon_ms, 3000.0);
  for (int i = 0; i < 10; ++i) {
    auto r = chat(chat_body("m", "cordoned " + std::to_string(i)));
    ASSERT_EQ(r.status, 200u);
    EXPECT_EQ(r.node, "b");
  }
  // The mirror refreshes on the cordon flip itself (not only every 5 s).
  EXPECT_TRUE(
      wait_until([&] { return metric(metrics(), "cgn_cluster_node_cordoned{node=\"a\"}") == 1.0; }, 3s));

  const auto t1 = std::chrono::steady_clock::now();
  del("/cognitora/cordon/a");
  ASSERT_TRUE(wait_until([&] { return chat(body).node == "a"; }, 3s, 5ms));
  std::printf("[measured] uncordon -> traffic back: %.1f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
}

TEST_F(EtcdBackend, PolicyKeyHotReloadsAndABadValueIsIgnored) {
  start_gateway("kv");
  add_nodes();
  const std::string body = chat_body("m", long_prompt("policy"));
  publish("a", body_digests(body));
  ASSERT_TRUE(wait_until([&] { return chat(body).node == "a"; }, 3s));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(chat(body).node, "a");
  }
  // round_robin ignores the prefix: the same prompt now lands on both nodes.
  put("/cognitora/policy", "[router]\npolicy = \"round_robin\"\n");
  auto both = [&] {
    std::set<std::string> s;
    for (int i = 0; i < 4; ++i) {
      s.insert(chat(body).node);
    }
    return s.size() == 2;
  };
  ASSERT_TRUE(wait_until(both, 3s));
  // A bad value is rejected and round_robin stays.
  put("/cognitora/policy", "[router]\npolicy = \"fastest\"\n");
  put("/cognitora/nodes/a", record_json("a", a_->port()));  // a later event: the bad one was seen
  ASSERT_TRUE(wait_until(both, 3s));
  // Deleting the key restores the router's own configuration (kv).
  del("/cognitora/policy");
  ASSERT_TRUE(wait_until([&] { return chat(body).node == "a" && chat(body).node == "a"; }, 3s));
  EXPECT_GE(metric(metrics(), "cgn_router_state_events_total{backend=\"etcd\",kind=\"policy\"}"), 2.0);
}

TEST_F(EtcdBackend, EtcdRestartMidTrafficFailsNoRequestAndConvergesWithoutDuplicates) {
  start_gateway();
  add_nodes();
  const std::string body = chat_body("m", long_prompt("restart"));
  const auto digests = body_digests(body);
  publish("a", digests);
  // Every published digest has arrived as a prefixes event before the baseline is read (a first
  // request can land on a by the tie-break before the events do).
  const auto prefix_events = [&] {
    return metric(metrics(), "cgn_router_state_events_total{backend=\"etcd\",kind=\"prefixes\"}");
  };
  ASSERT_TRUE(wait_until([&] { return prefix_events() >= static_cast<double>(digests.size()); }, 5s));
  ASSERT_TRUE(wait_until([&] { return chat(body).node == "a"; }, 3s));

  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  // A jthread: a failed ASSERT below returns with the traffic stopped and joined, not a
  // std::terminate that hides the failure and every later test of the binary.
  std::jthread traffic([&](const std::stop_token& token) {
    while (!stop.load() && !token.stop_requested()) {
      auto r = chat(body);
      (r.status == 200 ? ok : failed)++;
    }
  });
  auto served_more = [&](int n) {
    const int target = ok.load() + n;
    return wait_until([&] { return ok.load() >= target; }, 10s);
  };
  ASSERT_TRUE(served_more(10));
  const double prefix_events_before = prefix_events();

  // 1. A clean stop and start with nothing changed: no event replayed.
  etcd_.stop();
  ASSERT_TRUE(wait_until(
      [&] { return metric(metrics(), "cgn_router_state_backend_up{backend=\"etcd\"}") == 0; }, 10s));
  ASSERT_TRUE(served_more(10));  // last-known state keeps serving
  EXPECT_EQ(gateway_->healthy_nodes(), 2u);
  ASSERT_TRUE(etcd_.start()) << etcd_.log();
  ASSERT_TRUE(wait_until(
      [&] { return metric(metrics(), "cgn_router_state_backend_up{backend=\"etcd\"}") == 1; }, 10s));
  ASSERT_TRUE(served_more(10));

  // 2. Changes while the router cannot reach etcd, then compaction: the router resyncs from a
  //    fresh range and applies only the difference.
  etcd_.stop();
  ASSERT_TRUE(etcd_.start(20s, /*serve_endpoint=*/false)) << etcd_.log();
  ASSERT_TRUE(reconnected(*admin_));  // the test's own client, in its reconnect backoff
  ASSERT_TRUE(served_more(5));
  del("/cognitora/nodes/b");
  put("/cognitora/cordon/b", "true");
  const std::string body2 = chat_body("m", long_prompt("restart-2"));
  const auto digests2 = body_digests(body2);
  publish("a", digests2);
  auto head = admin_->get("/cognitora/nodes/a");
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(admin_->compact(head->revision).ok());
  EXPECT_EQ(gateway_->known_nodes(), 2u);  // nothing seen yet
  etcd_.stop();
  ASSERT_TRUE(etcd_.start()) << etcd_.log();
  ASSERT_TRUE(wait_until([&] { return gateway_->known_nodes() == 1; }, 10s));
  ASSERT_TRUE(served_more(10));
  stop = true;
  traffic.join();

  EXPECT_EQ(failed.load(), 0) << "requests failed during the etcd outage";
  std::printf("[measured] etcd restart mid-traffic: %d requests served, %d failed\n", ok.load(),
              failed.load());
  // Converged: b gone, a holds both prompts' digests once (the index counts each entry once;
  // traffic only touched entries that were confirmed already).
  gateway_->refresh_cluster_metrics();
  const std::string m = metrics();
  EXPECT_EQ(metric(m, "cgn_router_prefix_index_entries"),
            static_cast<double>(digests.size() + digests2.size()));
  const double prefix_events_after =
      metric(m, "cgn_router_state_events_total{backend=\"etcd\",kind=\"prefixes\"}");
  // Exactly one prefixes event per new digest after the resync (none replayed for old ones).
  EXPECT_EQ(prefix_events_after - prefix_events_before, static_cast<double>(digests2.size()));
  EXPECT_EQ(chat(body2).node, "a");
}

}  // namespace
}  // namespace cgn::router
