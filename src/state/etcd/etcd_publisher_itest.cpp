// EtcdPublisher against a real etcd (src/testing/etcd_server.h): keys on the lease, expiry after
// a crash, one txn per flush interval, epoch clears, lease loss, outage and reconcile.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "core/digest.h"
#include "state/etcd/etcd_publisher.h"
#include "state/etcd/itest_util.h"
#include "state/etcd/keys.h"
#include "testing/etcd_server.h"
#include "testing/process.h"

namespace cgn::state {
namespace {

using namespace std::chrono_literals;
using cgn::testing::wait_until;
namespace keys = etcd::keys;

std::string node_for_test() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string n = std::string("pub-") + info->name();
  std::replace(n.begin(), n.end(), '/', '-');
  return n;
}

// A chain of `n` real digests for conversation `conv` (distinct conversations share none).
std::vector<Digest> chain(uint32_t conv, size_t n) {
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    std::string block = std::to_string(conv) + "/" + std::to_string(i) + ":";
    block.resize(256, static_cast<char>('a' + (conv + i) % 26));
    text += block;
  }
  DigestSeedFields f;
  f.model = "m";
  std::vector<Digest> out;
  compute_prefix_digests(make_digest_seed(f), text, 256, out);
  return out;
}

struct RecordBox {
  std::mutex mu;
  cluster::NodeRecord rec;
  cluster::NodeRecord get() {
    std::lock_guard lock(mu);
    return rec;
  }
  void set_epoch(uint64_t e) {
    std::lock_guard lock(mu);
    rec.kv_epoch = e;
  }
};

struct Fixture {
  explicit Fixture(const std::string& endpoint, std::string node, size_t max_prefixes = 4096,
                   std::chrono::milliseconds interval = 100ms) {
    client = etcd::itest::make_client(endpoint, 1000ms);
    box.rec.node_id = node;
    box.rec.address = "127.0.0.1:1";
    box.rec.engine = "sim";
    box.rec.kv_epoch = 1;
    box.rec.generation = 1;
    PublisherOptions o;
    o.node_id = node;
    o.flush_interval = interval;
    o.lease_ttl_s = 2;
    o.max_prefixes = max_prefixes;
    o.record_source = [this] { return box.get(); };
    pub = std::make_unique<EtcdPublisher>(client, o);
  }
  std::shared_ptr<etcd::EtcdClient> client;
  RecordBox box;
  std::unique_ptr<EtcdPublisher> pub;
};

std::set<std::string> kv_keys(etcd::EtcdClient& admin, const std::string& node) {
  std::set<std::string> out;
  auto r = admin.get_prefix(keys::kv_prefix(node));
  if (r) {
    for (const auto& kv : r->kvs) {
      out.insert(kv.key);
    }
  }
  return out;
}

std::set<std::string> expected_keys(const std::string& node, const std::vector<Digest>& ds) {
  std::set<std::string> out;
  for (const auto& d : ds) {
    out.insert(keys::kv_key(node, d));
  }
  return out;
}

TEST(EtcdPublisher, record_and_prefixes_appear_on_one_lease_and_vanish_after_a_crash) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node);
  const auto c1 = chain(1, 6);
  const auto c2 = chain(2, 4);
  f.pub->record_prefixes(c1);
  f.pub->record_prefixes(c2);
  f.pub->start();
  std::set<std::string> want = expected_keys(node, c1);
  want.merge(expected_keys(node, c2));
  ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node) == want; }, 10s));
  auto rec = admin->get(keys::node_key(node));
  ASSERT_TRUE(rec.ok());
  ASSERT_EQ(rec->kvs.size(), 1u);
  auto parsed = cluster::parse_node_record(rec->kvs[0].value);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->node_id, node);
  const int64_t lease = rec->kvs[0].lease;
  EXPECT_NE(lease, 0);
  EXPECT_EQ(lease, f.pub->stats().lease_id);
  const auto listed1 = admin->get_prefix(keys::kv_prefix(node));
  ASSERT_TRUE(listed1.ok());
  for (const auto& kv : listed1->kvs) {
    EXPECT_EQ(kv.lease, lease) << kv.key;
    EXPECT_EQ(kv.value, "1");  // the kv_epoch the prefix was published under
  }
  // A crash: keep-alives stop, nothing is revoked; everything goes when the 2 s lease expires.
  f.pub.reset();
  EXPECT_TRUE(wait_until(
      [&] { return kv_keys(*admin, node).empty() && admin->get(keys::node_key(node))->kvs.empty(); }, 8s));
}

std::map<std::string, std::string> kv_values(etcd::EtcdClient& admin, const std::string& node) {
  std::map<std::string, std::string> out;
  if (auto r = admin.get_prefix(keys::kv_prefix(node))) {
    for (const auto& kv : r->kvs) {
      out[kv.key] = kv.value;
    }
  }
  return out;
}

TEST(EtcdPublisher, kvcached_residency_is_published_with_its_tier_and_the_engine_keeps_its_own) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node);
  const auto held = chain(4, 2);     // the engine holds these
  const auto spilled = chain(5, 3);  // only kvcached holds these
  f.pub->record_prefixes(held);
  std::vector<std::pair<Digest, routing::Tier>> resident = {{held[0], routing::Tier::kRam},
                                                            {spilled[0], routing::Tier::kRam},
                                                            {spilled[1], routing::Tier::kRam},
                                                            {spilled[2], routing::Tier::kSsd}};
  f.pub->record_residency(resident, {});
  f.pub->start();
  const std::string ram = R"({"epoch":1,"tier":"ram"})";
  const std::string ssd = R"({"epoch":1,"tier":"ssd"})";
  std::map<std::string, std::string> want = {{keys::kv_key(node, held[0]), "1"},
                                             {keys::kv_key(node, held[1]), "1"},
                                             {keys::kv_key(node, spilled[0]), ram},
                                             {keys::kv_key(node, spilled[1]), ram},
                                             {keys::kv_key(node, spilled[2]), ssd}};
  ASSERT_TRUE(wait_until([&] { return kv_values(*admin, node) == want; }, 10s));
  // RAM spilled one to SSD, another left kvcached altogether; the engine took the third back.
  resident = {{spilled[0], routing::Tier::kSsd}};
  const std::vector<Digest> gone = {spilled[1], held[1]};  // held[1] stays: the engine has it
  f.pub->record_residency(resident, gone);
  f.pub->record_prefixes(std::vector<Digest>{spilled[2]});
  want[keys::kv_key(node, spilled[0])] = ssd;
  want.erase(keys::kv_key(node, spilled[1]));
  want[keys::kv_key(node, spilled[2])] = "1";
  EXPECT_TRUE(wait_until([&] { return kv_values(*admin, node) == want; }, 10s));
}

TEST(EtcdPublisher, graceful_stop_revokes_at_once) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node);
  f.pub->record_prefixes(chain(3, 3));
  f.pub->start();
  ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node).size() == 3; }, 10s));
  f.pub->stop(/*revoke=*/true);
  // Revoke is synchronous: no waiting for a TTL.
  EXPECT_TRUE(kv_keys(*admin, node).empty());
  EXPECT_TRUE(admin->get(keys::node_key(node))->kvs.empty());
}

TEST(EtcdPublisher, at_most_one_txn_per_flush_interval_and_only_changes) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node, 4096, 200ms);
  f.pub->start();
  ASSERT_TRUE(wait_until([&] { return f.pub->stats().reconciles == 1; }, 10s));
  const auto s0 = f.pub->stats();
  const int64_t rev0 = admin->get(keys::node_key(node))->revision;
  const auto t0 = std::chrono::steady_clock::now();
  // Many requests, each touching a chain, much faster than the interval.
  size_t expected_puts = 0;
  for (uint32_t conv = 10; conv < 60; ++conv) {
    auto c = chain(conv, 3);
    f.pub->record_prefixes(c);
    f.pub->record_prefixes(c);  // a repeat adds nothing
    expected_puts += c.size();
    std::this_thread::sleep_for(20ms);  // pacing the load, not synchronisation
  }
  ASSERT_TRUE(wait_until([&] { return f.pub->stats().keys_put - s0.keys_put == expected_puts; }, 10s));
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  const auto s1 = f.pub->stats();
  const int64_t rev1 = admin->get(keys::node_key(node))->revision;
  const uint64_t txns = s1.txns - s0.txns;
  const auto intervals = static_cast<uint64_t>(elapsed / 200ms) + 1;
  // etcd's revision grows by one per write txn: the store agrees with the publisher's count.
  EXPECT_EQ(static_cast<uint64_t>(rev1 - rev0), txns);
  EXPECT_LE(txns, intervals) << "txns " << txns << " over " << intervals << " intervals";
  EXPECT_GE(txns, 2u);  // the load spanned several intervals: batched, not one giant write
  EXPECT_EQ(s1.keys_deleted, s0.keys_deleted);
  EXPECT_EQ(kv_keys(*admin, node).size(), expected_puts);
  // Idle: no writes at all (the record did not change either).
  const auto idle = f.pub->stats().txns;
  std::this_thread::sleep_for(600ms);  // three intervals of nothing; asserting absence
  EXPECT_EQ(f.pub->stats().txns, idle);
}

TEST(EtcdPublisher, capacity_evictions_are_deleted_and_splits_stay_under_128_ops) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node, 300, 100ms);
  // 400 digests before the first flush: 300 kept, one full sync in three txns (<= 128 ops each).
  for (uint32_t conv = 0; conv < 40; ++conv) {
    f.pub->record_prefixes(chain(1000 + conv, 10));
  }
  f.pub->start();
  ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node).size() == 300; }, 10s));
  // 301 ops (record + 300 puts) in 128-op txns; counted once the batch returns.
  EXPECT_TRUE(wait_until([&] { return f.pub->stats().txns == 3u; }, 5s)) << f.pub->stats().txns;
  // A smaller pool shrinks the set: the engine reports 512 blocks of 16 tokens = 128 digests.
  {
    std::lock_guard lock(f.box.mu);
    f.box.rec.total_blocks = 512;
    f.box.rec.block_size = 16;
  }
  ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node).size() == 128; }, 10s));
  // etcd applies the txn before the publisher counts it: wait for the count, do not race it.
  EXPECT_TRUE(wait_until([&] { return f.pub->stats().keys_deleted == 300u - 128u; }, 5s))
      << f.pub->stats().keys_deleted;
  EXPECT_EQ(f.pub->stats().capacity, 128u);
}

TEST(EtcdPublisher, kv_pressure_prunes_oldest_first) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node);
  const auto old_chain = chain(7, 10);
  const auto new_chain = chain(8, 10);
  f.pub->record_prefixes(old_chain);
  f.pub->record_prefixes(new_chain);
  f.pub->start();
  ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node).size() == 20; }, 10s));
  {
    std::lock_guard lock(f.box.mu);
    f.box.rec.total_blocks = 100000;
    f.box.rec.block_size = 16;
    f.box.rec.free_blocks = 1000;  // 1% free
  }
  ASSERT_TRUE(wait_until([&] { return f.pub->stats().pressure_prunes >= 1; }, 10s));
  {
    std::lock_guard lock(f.box.mu);
    f.box.rec.free_blocks = 50000;  // pressure over
  }
  ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node).size() == f.pub->stats().published; }, 10s));
  const auto left = kv_keys(*admin, node);
  EXPECT_LT(left.size(), 20u);
  // The newest chain's root survived; the oldest chain's tail went first.
  EXPECT_TRUE(left.contains(keys::kv_key(node, new_chain[0])));
  EXPECT_FALSE(left.contains(keys::kv_key(node, old_chain.back())));
}

TEST(EtcdPublisher, epoch_change_removes_every_prefix_with_the_new_record) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node);
  f.pub->record_prefixes(chain(20, 8));
  f.pub->start();
  ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node).size() == 8; }, 10s));
  f.box.set_epoch(2);
  const auto fresh = chain(21, 2);
  f.pub->record_prefixes(fresh);  // may land before or after the flush that sees epoch 2
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = admin->get(keys::node_key(node));
        return r && r->kvs.size() == 1 && cluster::parse_node_record(r->kvs[0].value)->kv_epoch == 2;
      },
      10s));
  // At the revision that published epoch 2, no prefix of epoch 1 was left: one atomic txn.
  auto rec = admin->get(keys::node_key(node));
  auto at = admin->range(keys::kv_prefix(node), etcd::prefix_range_end(keys::kv_prefix(node)), 0,
                         rec->kvs[0].mod_revision);
  ASSERT_TRUE(at.ok());
  EXPECT_TRUE(at->kvs.empty());
  EXPECT_EQ(f.pub->stats().epoch_clears, 1u);
  // Prefixes recorded after the change are published under the new epoch.
  f.pub->record_prefixes(chain(22, 3));
  ASSERT_TRUE(wait_until(
      [&] { return kv_keys(*admin, node).size() == 3 || kv_keys(*admin, node).size() == 5; }, 10s));
  const auto listed2 = admin->get_prefix(keys::kv_prefix(node));
  ASSERT_TRUE(listed2.ok());
  for (const auto& kv : listed2->kvs) {
    EXPECT_EQ(kv.value, "2") << kv.key;
  }
}

TEST(EtcdPublisher, stale_keys_of_a_previous_incarnation_are_deleted_at_start) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  const auto stale = chain(30, 2);
  for (const auto& d : stale) {
    ASSERT_TRUE(admin->put(keys::kv_key(node, d), "0").ok());
  }
  Fixture f(server.endpoint(), node);
  const auto held = chain(31, 2);
  f.pub->record_prefixes(held);
  f.pub->start();
  EXPECT_TRUE(wait_until([&] { return kv_keys(*admin, node) == expected_keys(node, held); }, 10s));
}

TEST(EtcdPublisher, lost_lease_is_regranted_and_everything_republished) {
  auto& server = etcd::itest::shared_etcd();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node);
  const auto c = chain(40, 5);
  f.pub->record_prefixes(c);
  f.pub->start();
  ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node).size() == 5; }, 10s));
  const int64_t first = f.pub->stats().lease_id;
  ASSERT_TRUE(admin->lease_revoke(first).ok());  // what expiry during a long partition does
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = admin->get(keys::node_key(node));
        return f.pub->stats().lease_id != first && kv_keys(*admin, node) == expected_keys(node, c) && r &&
               r->kvs.size() == 1 && r->kvs[0].lease == f.pub->stats().lease_id;
      },
      15s));
  EXPECT_EQ(f.pub->stats().lease_grants, 2u);
  const auto listed3 = admin->get_prefix(keys::kv_prefix(node));
  ASSERT_TRUE(listed3.ok());
  for (const auto& kv : listed3->kvs) {
    EXPECT_EQ(kv.lease, f.pub->stats().lease_id);
  }
}

TEST(EtcdPublisher, outage_keeps_changes_and_reconciles_exactly_when_etcd_returns) {
  cgn::testing::EtcdServer server;
  ASSERT_TRUE(server.start()) << server.log();
  const std::string node = node_for_test();
  Fixture f(server.endpoint(), node, 10, 100ms);
  f.pub->record_prefixes(chain(50, 6));
  f.pub->start();
  {
    auto admin = etcd::itest::make_client(server.admin_endpoint());
    ASSERT_TRUE(wait_until([&] { return kv_keys(*admin, node).size() == 6; }, 10s));
  }
  // etcd stays up for the test's own admin port but the publisher cannot reach it.
  server.stop();
  ASSERT_TRUE(server.start(20s, /*serve_endpoint=*/false)) << server.log();
  ASSERT_TRUE(wait_until([&] { return !f.pub->stats().connected; }, 10s));
  // Traffic continues meanwhile: new chains evict some of the published ones (capacity 10).
  const auto c2 = chain(51, 6);
  f.pub->record_prefixes(c2);
  const uint64_t reconciles = f.pub->stats().reconciles;
  server.stop();
  ASSERT_TRUE(server.start()) << server.log();
  auto admin = etcd::itest::make_client(server.admin_endpoint());
  std::vector<Digest> want_digests;
  ASSERT_TRUE(wait_until(
      [&] {
        auto s = f.pub->stats();
        return s.connected && s.reconciles > reconciles && kv_keys(*admin, node).size() == 10;
      },
      20s));
  // Exactly the set the agent holds now: nothing stale, nothing missing, one record.
  auto rec = admin->get_prefix(keys::node_key(node));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->kvs.size(), 1u);
  const auto keys_now = kv_keys(*admin, node);
  EXPECT_TRUE(keys_now.contains(keys::kv_key(node, c2[0])));
  size_t from_c2 = 0;
  for (const auto& d : c2) {
    from_c2 += keys_now.contains(keys::kv_key(node, d)) ? 1 : 0;
  }
  EXPECT_EQ(from_c2, c2.size());
  const auto listed4 = admin->get_prefix(keys::kv_prefix(node));
  ASSERT_TRUE(listed4.ok());
  for (const auto& kv : listed4->kvs) {
    EXPECT_EQ(kv.lease, rec->kvs[0].lease);
  }
}

}  // namespace
}  // namespace cgn::state
