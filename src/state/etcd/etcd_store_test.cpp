// EtcdStateView: keys under /cognitora/ -> NodeEvents, without etcd or threads.
#include "state/etcd/etcd_store.h"

#include <gtest/gtest.h>

#include "cluster/node_record.h"

namespace cgn::state {
namespace {

using Kind = cluster::NodeEvent::Kind;

Digest digest(uint8_t b) {
  Digest d{};
  d.fill(b);
  return d;
}

std::string kv_key(const std::string& node, uint8_t b) {
  return "/cognitora/kv/" + node + "/" + to_hex(digest(b));
}

std::string record(const std::string& id, uint16_t port, uint64_t epoch = 1, bool ready = true,
                   bool cordon = false) {
  cluster::NodeRecord r;
  r.node_id = id;
  r.address = "127.0.0.1:" + std::to_string(port);
  r.models = {"m"};
  r.engine = "vllm";
  r.ready = ready;
  r.kv_epoch = epoch;
  r.generation = 7;
  r.cordon = cordon;
  r.total_blocks = 100;
  r.free_blocks = 40;
  return cluster::to_json(r);
}

struct Fixture : ::testing::Test {
  std::vector<cluster::NodeEvent> events;
  EtcdStateView view{"/cognitora", base(), [this](const cluster::NodeEvent& ev) { events.push_back(ev); }};

  static config::RouterConfig base() {
    config::RouterConfig c;
    c.policy = "kv";
    return c;
  }
  std::vector<cluster::NodeEvent> take() { return std::exchange(events, {}); }
};

TEST_F(Fixture, NodeRecordBecomesAnUpsertWithTheRecordsEndpointAndDeleteARemove) {
  view.put("/cognitora/nodes/gpu-1", record("gpu-1", 9001), 5);
  auto ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kUpsert);
  EXPECT_EQ(ev[0].id, "gpu-1");
  EXPECT_EQ(ev[0].endpoint.host, "127.0.0.1");
  EXPECT_EQ(ev[0].endpoint.port, 9001);
  EXPECT_EQ(ev[0].source, routing::UpdateSource::kEtcd);
  EXPECT_EQ(ev[0].update.health, routing::Health::kHealthy);
  EXPECT_EQ(ev[0].update.cordoned, false);
  EXPECT_EQ(ev[0].update.kv_epoch, 1u);
  EXPECT_NEAR(*ev[0].update.kv_used_ratio, 0.6, 1e-9);
  // Alive while its record (on the agent's lease) is, however long it goes unchanged.
  EXPECT_EQ(ev[0].update.liveness, routing::Liveness::kMembership);
  EXPECT_EQ(view.nodes(), 1u);

  view.del("/cognitora/nodes/gpu-1", 6);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kRemove);
  EXPECT_EQ(ev[0].id, "gpu-1");
  EXPECT_EQ(view.nodes(), 0u);
  // Deleting it again (a resync after the fact) says nothing.
  view.del("/cognitora/nodes/gpu-1", 7);
  EXPECT_TRUE(take().empty());
}

TEST_F(Fixture, BadRecordsAreRejectedAndTheLastGoodOneKept) {
  view.put("/cognitora/nodes/a", record("a", 9001), 5);
  take();
  view.put("/cognitora/nodes/a", "{not json", 6);
  view.put("/cognitora/nodes/a", record("b", 9002), 7);  // id differs from the key
  view.put("/cognitora/nodes/a",
           R"({"node_id":"a","address":"","engine":"vllm","role":"both","kv_epoch":1,"generation":1})",
           8);  // no usable address
  EXPECT_TRUE(take().empty());
  EXPECT_EQ(view.rejected(), 3u);
  EXPECT_EQ(view.nodes(), 1u);
  // Keys that are not ours, or malformed, are ignored.
  view.put("/cognitora/nodes/a/extra", "x", 9);
  view.put("/cognitora/kv/a/nothex", "", 10);
  view.put("/other/nodes/a", record("a", 9001), 11);
  view.put("/cognitora/autoscaler/hint", "x", 12);
  EXPECT_TRUE(take().empty());
}

TEST_F(Fixture, PrefixesOfAKnownNodeAreConfirmedAndRemoved) {
  view.put("/cognitora/nodes/a", record("a", 9001), 5);
  take();
  view.put(kv_key("a", 1), "", 6);
  auto ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kPrefixes);
  EXPECT_EQ(ev[0].id, "a");
  ASSERT_EQ(ev[0].confirmed.size(), 1u);
  EXPECT_EQ(ev[0].confirmed[0], digest(1));
  EXPECT_TRUE(ev[0].removed.empty());
  // The same key again (lease refresh, replay after a reconnect): no duplicate.
  view.put(kv_key("a", 1), "", 7);
  EXPECT_TRUE(take().empty());
  view.del(kv_key("a", 1), 8);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  ASSERT_EQ(ev[0].removed.size(), 1u);
  EXPECT_EQ(ev[0].removed[0], digest(1));
  EXPECT_EQ(view.prefixes("a"), 0u);
  view.del(kv_key("a", 1), 9);
  EXPECT_TRUE(take().empty());
}

TEST_F(Fixture, PrefixesSeenBeforeTheirNodeAreConfirmedWhenItArrives) {
  // A full read returns /kv/ before /nodes/ (key order).
  view.put(kv_key("a", 1), "", 3);
  view.put(kv_key("a", 2), "", 3);
  EXPECT_TRUE(take().empty());
  EXPECT_EQ(view.prefixes("a"), 2u);
  view.put("/cognitora/nodes/a", record("a", 9001), 4);
  auto ev = take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, Kind::kUpsert);
  EXPECT_EQ(ev[1].kind, Kind::kPrefixes);
  EXPECT_EQ(ev[1].confirmed.size(), 2u);
}

TEST_F(Fixture, AnEpochChangeReconfirmsOnlyDigestsWrittenAfterTheNewRecord) {
  view.put("/cognitora/nodes/a", record("a", 9001, 1), 5);
  view.put(kv_key("a", 1), "", 6);
  take();
  // The agent wrote a new-epoch digest, then the record (the old digest still lingers).
  view.put(kv_key("a", 2), "", 10);
  view.put("/cognitora/nodes/a", record("a", 9001, 2), 9);
  auto ev = take();
  // kv 2 (revision 10) confirmed on sight, then the upsert (the core drops entries), then
  // the re-confirmation of what is newer than the record.
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[1].kind, Kind::kUpsert);
  EXPECT_EQ(ev[1].update.kv_epoch, 2u);
  ASSERT_EQ(ev[2].kind, Kind::kPrefixes);
  ASSERT_EQ(ev[2].confirmed.size(), 1u);
  EXPECT_EQ(ev[2].confirmed[0], digest(2));
  // Same epoch again: just the upsert.
  view.put("/cognitora/nodes/a", record("a", 9001, 2), 11);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kUpsert);
}

TEST_F(Fixture, EpochValuedPrefixesCountOnlyUnderTheirEpoch) {
  view.put("/cognitora/nodes/a", record("a", 9001, 1), 5);
  view.put(kv_key("a", 1), "1", 6);
  auto ev = take();
  ASSERT_EQ(ev.size(), 2u);
  ASSERT_EQ(ev[1].confirmed.size(), 1u);
  // A digest of the next epoch, written before the record that announces it: not yet.
  view.put(kv_key("a", 2), "2", 7);
  EXPECT_TRUE(take().empty());
  view.put("/cognitora/nodes/a", record("a", 9001, 2), 8);
  ev = take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, Kind::kUpsert);
  ASSERT_EQ(ev[1].confirmed.size(), 1u);
  EXPECT_EQ(ev[1].confirmed[0], digest(2));
  // The old-epoch key lingering, then deleted: nothing to remove (the core already dropped it).
  view.del(kv_key("a", 1), 9);
  EXPECT_TRUE(take().empty());
  // A stale write naming an old epoch is not confirmed; the node's removal and return
  // re-confirms what matches.
  view.put(kv_key("a", 3), "1", 10);
  EXPECT_TRUE(take().empty());
  view.del("/cognitora/nodes/a", 11);
  take();
  view.put("/cognitora/nodes/a", record("a", 9001, 2), 12);
  ev = take();
  ASSERT_EQ(ev.size(), 2u);
  ASSERT_EQ(ev[1].confirmed.size(), 1u);
  EXPECT_EQ(ev[1].confirmed[0], digest(2));
  // Deleting a confirmed key removes it.
  view.del(kv_key("a", 2), 13);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  ASSERT_EQ(ev[0].removed.size(), 1u);
}

TEST_F(Fixture, TierValuesConfirmAtTheirTierAndATierChangeReconfirms) {
  view.put("/cognitora/nodes/a", record("a", 9001, 1), 5);
  take();
  view.put(kv_key("a", 1), R"({"epoch":1,"tier":"ram"})", 6);
  view.put(kv_key("a", 2), "1", 6);
  auto ev = take();
  ASSERT_EQ(ev.size(), 2u);
  ASSERT_EQ(ev[0].confirmed.size(), 1u);
  EXPECT_EQ(ev[0].tier, routing::Tier::kRam);
  EXPECT_EQ(ev[1].tier, routing::Tier::kEngine);
  // RAM spilled it to SSD: a confirm at the new tier, nothing removed.
  view.put(kv_key("a", 1), R"({"epoch":1,"tier":"ssd"})", 7);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  ASSERT_EQ(ev[0].confirmed.size(), 1u);
  EXPECT_EQ(ev[0].tier, routing::Tier::kSsd);
  EXPECT_TRUE(ev[0].removed.empty());
  // The same tier again: nothing.
  view.put(kv_key("a", 1), R"({"epoch":1,"tier":"ssd"})", 8);
  EXPECT_TRUE(take().empty());
  // A tier value of another epoch waits for its record; the re-confirmation keeps each tier.
  view.put(kv_key("a", 3), R"({"epoch":2,"tier":"ram"})", 9);
  EXPECT_TRUE(take().empty());
  view.put("/cognitora/nodes/a", record("a", 9001, 2), 10);
  ev = take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, Kind::kUpsert);
  ASSERT_EQ(ev[1].confirmed.size(), 1u);
  EXPECT_EQ(ev[1].confirmed[0], digest(3));
  EXPECT_EQ(ev[1].tier, routing::Tier::kRam);
}

TEST_F(Fixture, MalformedTierValuesAreRejected) {
  view.put("/cognitora/nodes/a", record("a", 9001, 1), 5);
  take();
  for (const char* bad :
       {R"({"epoch":1,"tier":"hbm"})", R"({"epoch":-1,"tier":"ram"})", R"({"tier":"ram"})", "{"}) {
    view.put(kv_key("a", 1), bad, 6);
  }
  EXPECT_TRUE(take().empty());
  EXPECT_EQ(view.rejected(), 4u);
}

TEST_F(Fixture, CordonKeyCordonsAndItsDeletionUncordons) {
  // A cordon set before the node exists applies when it arrives.
  view.put("/cognitora/cordon/a", "true", 2);
  EXPECT_TRUE(take().empty());
  view.put("/cognitora/nodes/a", record("a", 9001), 3);
  auto ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].update.cordoned, true);
  view.del("/cognitora/cordon/a", 4);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kUpsert);
  EXPECT_EQ(ev[0].update.cordoned, false);
  EXPECT_EQ(ev[0].endpoint.port, 9001);
  // An explicit "false" value is not a cordon; flipping it is.
  view.put("/cognitora/cordon/a", "false", 5);
  EXPECT_TRUE(take().empty());
  view.put("/cognitora/cordon/a", "1", 6);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].update.cordoned, true);
  // The agent's own cordon flag also cordons.
  view.del("/cognitora/cordon/a", 7);
  take();
  view.put("/cognitora/nodes/a", record("a", 9001, 1, true, true), 8);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].update.cordoned, true);
}

TEST(CordonValue, FalseLikeValuesAreNotCordons) {
  for (const char* v : {"false", "FALSE", " 0 ", "no", "off"}) {
    EXPECT_FALSE(cordon_value(v)) << v;
  }
  for (const char* v : {"", "true", "1", "maintenance", "yes"}) {
    EXPECT_TRUE(cordon_value(v)) << v;
  }
}

TEST_F(Fixture, PolicyIsValidatedLikeTheConfigFileAndDeletionRestoresTheBase) {
  view.put("/cognitora/policy",
           "[router]\npolicy = \"least_load\"\n[router.routing.weights]\nqueue_ms_per_request = 100\n", 5);
  auto ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kPolicy);
  ASSERT_TRUE(ev[0].policy);
  EXPECT_EQ(ev[0].policy->policy, "least_load");
  EXPECT_EQ(ev[0].policy->routing.weights.queue_ms_per_request, 100);
  EXPECT_NE(ev[0].policy_origin.find("revision 5"), std::string::npos);

  // Bad values, unknown keys and broken TOML are rejected with the file's messages.
  view.put("/cognitora/policy", "[router]\npolicy = \"fastest\"\n", 6);
  view.put("/cognitora/policy", "[router]\npolcy = \"kv\"\n", 7);
  view.put("/cognitora/policy", "[router\n", 8);
  view.put("/cognitora/policy", "[router.routing.weights]\nqueue_ms_per_request = -1\n", 9);
  EXPECT_TRUE(take().empty());
  EXPECT_EQ(view.rejected(), 4u);

  view.del("/cognitora/policy", 10);
  ev = take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kPolicy);
  EXPECT_EQ(ev[0].policy->policy, "kv");
}

TEST(ParsePolicyValue, NamesTheKeyInItsErrors) {
  auto r = parse_policy_value("[router]\npolicy = \"fastest\"\n", "/cognitora/policy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/cognitora/policy"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("fastest"), std::string::npos) << r.error().message;
}

TEST(EtcdStateViewRoot, AConfiguredPrefixIsHonoured) {
  std::vector<cluster::NodeEvent> events;
  EtcdStateView view("/lab2/", {}, [&](const cluster::NodeEvent& ev) { events.push_back(ev); });
  view.put("/cognitora/nodes/a", record("a", 9001), 1);
  EXPECT_TRUE(events.empty());
  view.put("/lab2/nodes/a", record("a", 9001), 2);
  view.put("/lab2/kv/a/" + to_hex(digest(3)), "", 3);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, Kind::kPrefixes);
}

TEST(EtcdStoreCreate, RejectsAnUnusableConfiguration) {
  EXPECT_FALSE(EtcdStore::create({}).ok());
  EtcdStoreOptions o;
  o.endpoints = {"127.0.0.1:2379"};
  o.root = "cognitora";
  EXPECT_FALSE(EtcdStore::create(o).ok());
}

}  // namespace
}  // namespace cgn::state
