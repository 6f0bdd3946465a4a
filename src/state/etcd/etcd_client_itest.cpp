// The KV, txn, lease and health calls against a real etcd.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "state/etcd/batch.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/itest_util.h"
#include "state/etcd/lease_keeper.h"
#include "testing/etcd_server.h"
#include "testing/process.h"

namespace cgn::etcd {
namespace {

using namespace std::chrono_literals;
using itest::fresh_prefix;
using itest::make_client;
using itest::shared_etcd;
using itest::test_prefix;

TEST(EtcdClient, put_get_delete_and_range_by_prefix) {
  auto client = make_client(shared_etcd().endpoint());
  const std::string p = fresh_prefix(*client);
  ASSERT_TRUE(client->put(p + "a", "1").ok());
  ASSERT_TRUE(client->put(p + "b", "2").ok());
  ASSERT_TRUE(client->put(p + "c/x", "3").ok());
  ASSERT_TRUE(client->put(p.substr(0, p.size() - 1) + "0", "outside").ok());  // just past the prefix

  auto one = client->get(p + "b");
  ASSERT_TRUE(one.ok()) << one.error().message;
  ASSERT_EQ(one->kvs.size(), 1u);
  EXPECT_EQ(one->kvs[0].value, "2");
  EXPECT_EQ(one->kvs[0].version, 1);

  auto all = client->get_prefix(p);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->kvs.size(), 3u);
  EXPECT_EQ(all->kvs[0].key, p + "a");
  EXPECT_EQ(all->kvs[2].key, p + "c/x");
  EXPECT_GE(all->revision, all->kvs[2].mod_revision);

  auto limited = client->get_prefix(p, 2);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->kvs.size(), 2u);
  EXPECT_TRUE(limited->more);
  EXPECT_EQ(limited->count, 3);

  auto paged = client->get_prefix_paged(p, 1);
  ASSERT_TRUE(paged.ok());
  ASSERT_EQ(paged->kvs.size(), 3u);
  EXPECT_EQ(paged->kvs[1].key, p + "b");

  auto d = client->del(p + "a");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->deleted, 1);
  EXPECT_TRUE(client->get(p + "a")->kvs.empty());

  auto dp = client->del_prefix(p);
  ASSERT_TRUE(dp.ok());
  EXPECT_EQ(dp->deleted, 2);
  EXPECT_TRUE(client->get_prefix(p)->kvs.empty());
  EXPECT_EQ(client->get(p.substr(0, p.size() - 1) + "0")->kvs.size(), 1u);
}

TEST(EtcdClient, txn_compare_and_swap) {
  auto client = make_client(shared_etcd().endpoint());
  const std::string k = fresh_prefix(*client) + "owner";

  // Create-if-absent succeeds once.
  TxnRequest create;
  create.compares = {TxnCompare::version(k, TxnCompare::Op::kEqual, 0)};
  create.success = {TxnOp::put(k, "alice")};
  create.failure = {TxnOp::get(k)};
  auto r1 = client->txn(create);
  ASSERT_TRUE(r1.ok()) << r1.error().message;
  EXPECT_TRUE(r1->succeeded);
  create.success = {TxnOp::put(k, "bob")};
  auto r2 = client->txn(create);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->succeeded);
  ASSERT_EQ(r2->results.size(), 1u);
  ASSERT_EQ(r2->results[0].kvs.size(), 1u);
  EXPECT_EQ(r2->results[0].kvs[0].value, "alice");

  // Swap guarded by mod_revision: a stale revision loses.
  const int64_t rev = r2->results[0].kvs[0].mod_revision;
  TxnRequest swap;
  swap.compares = {TxnCompare::mod_revision(k, TxnCompare::Op::kEqual, rev)};
  swap.success = {TxnOp::put(k, "carol")};
  auto r3 = client->txn(swap);
  ASSERT_TRUE(r3.ok());
  EXPECT_TRUE(r3->succeeded);
  auto r4 = client->txn(swap);
  ASSERT_TRUE(r4.ok());
  EXPECT_FALSE(r4->succeeded);

  TxnRequest by_value;
  by_value.compares = {TxnCompare::value_is(k, TxnCompare::Op::kEqual, "carol")};
  by_value.success = {TxnOp::del(k)};
  auto r5 = client->txn(by_value);
  ASSERT_TRUE(r5.ok());
  EXPECT_TRUE(r5->succeeded);
  EXPECT_TRUE(client->get(k)->kvs.empty());
}

TEST(EtcdClient, batch_over_128_ops_is_split_and_unsplit_txn_is_rejected) {
  auto client = make_client(shared_etcd().endpoint());
  const std::string p = fresh_prefix(*client);
  std::vector<TxnOp> ops;
  for (int i = 0; i < 300; ++i) {
    ops.push_back(TxnOp::put(p + std::to_string(i), "v"));
  }

  // etcd's default --max-txn-ops is 128: 129 ops in one txn are refused.
  TxnRequest too_big;
  too_big.success.assign(ops.begin(), ops.begin() + 129);
  auto rejected = client->txn(too_big);
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().code, EtcdErrc::kTooManyOps) << rejected.error().message;
  EXPECT_TRUE(client->get_prefix(p)->kvs.empty());

  auto batch = client->apply_batch(ops);
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  EXPECT_EQ(batch->txns, 3u);  // 128 + 128 + 44
  EXPECT_EQ(client->get_prefix(p)->count, 300);

  // Deletes and puts of the same keys in one batch are ordered into separate txns.
  std::vector<TxnOp> mixed;
  mixed.push_back(TxnOp::del(p, true));
  mixed.push_back(TxnOp::put(p + "0", "again"));
  auto again = client->apply_batch(mixed);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->txns, 2u);
  auto left = client->get_prefix(p);
  ASSERT_EQ(left->kvs.size(), 1u);
  EXPECT_EQ(left->kvs[0].value, "again");
}

TEST(EtcdClient, keepalive_keeps_key_beyond_ttl_and_key_vanishes_after_stop) {
  auto client = make_client(shared_etcd().endpoint());
  const std::string k = fresh_prefix(*client) + "node";
  auto keeper = LeaseKeeper::start(client, LeaseKeeperOptions{.ttl_seconds = 2});
  ASSERT_TRUE(keeper.ok()) << keeper.error().message;
  const int64_t lease = (*keeper)->lease_id();
  ASSERT_NE(lease, 0);
  ASSERT_TRUE(client->put(k, "alive", lease).ok());

  // Well past the 2 s TTL: the key must still be there, renewed several times.
  ASSERT_TRUE(cgn::testing::wait_until([&] { return (*keeper)->keepalives_acked() >= 6; }, 10s));
  auto still = client->get(k);
  ASSERT_TRUE(still.ok());
  ASSERT_EQ(still->kvs.size(), 1u);
  EXPECT_EQ(still->kvs[0].lease, lease);

  EXPECT_LT((*keeper)->since_last_ack(), 10s);

  (*keeper)->stop();
  // With renewals stopped, the age of the last confirmation passes the TTL.
  EXPECT_TRUE(cgn::testing::wait_until([&] { return (*keeper)->since_last_ack() > 2s; }, 10s));
  EXPECT_TRUE(cgn::testing::wait_until([&] { return client->get(k)->kvs.empty(); }, 10s, 50ms))
      << "key outlived its lease";
  auto ttl = client->lease_time_to_live(lease);
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(ttl->ttl_seconds, -1);
}

TEST(EtcdClient, revoked_lease_is_reported_lost_and_regranted) {
  auto client = make_client(shared_etcd().endpoint());
  const std::string k = fresh_prefix(*client) + "node";
  std::atomic<int64_t> lost_id{0};
  LeaseKeeperOptions o;
  o.ttl_seconds = 5;
  o.on_lost = [&](int64_t id, const std::string&) { lost_id.store(id); };
  auto keeper = LeaseKeeper::start(client, o);
  ASSERT_TRUE(keeper.ok());
  const int64_t first = (*keeper)->lease_id();
  ASSERT_TRUE(client->put(k, "v", first).ok());

  // Someone else revokes it: the keeper's next keep-alive learns it is gone.
  ASSERT_TRUE(client->lease_revoke(first).ok());
  EXPECT_TRUE(client->get(k)->kvs.empty());
  ASSERT_TRUE(cgn::testing::wait_until([&] { return lost_id.load() == first; }, 10s));
  EXPECT_EQ((*keeper)->lease_id(), 0);

  auto second = (*keeper)->regrant();
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*second, first);
  const uint64_t acked = (*keeper)->keepalives_acked();
  ASSERT_TRUE(cgn::testing::wait_until([&] { return (*keeper)->keepalives_acked() > acked; }, 10s));
  EXPECT_TRUE(client->put(k, "v2", *second).ok());

  // A put on the revoked lease is refused with a typed error.
  auto stale = client->put(k, "v3", first);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, EtcdErrc::kLeaseNotFound) << stale.error().message;
  EXPECT_TRUE((*keeper)->revoke().ok());
  EXPECT_TRUE(client->get(k)->kvs.empty());
}

TEST(EtcdClient, status_reports_reachable_server) {
  auto client = make_client(shared_etcd().endpoint());
  auto st = client->status();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_FALSE(st->version.empty());
  EXPECT_NE(st->leader, 0u);
  EXPECT_TRUE(client->reachable());
}

TEST(EtcdClient, fails_fast_while_etcd_is_down_and_recovers_when_it_returns) {
  cgn::testing::EtcdServer etcd;
  ASSERT_TRUE(etcd.start()) << etcd.log();
  std::atomic<int> changes{0};
  EtcdClientOptions o;
  o.endpoints = {etcd.endpoint()};
  o.call_timeout = 3s;
  o.on_reachability_change = [&](bool) { changes.fetch_add(1); };
  auto client = EtcdClient::create(o).value();
  ASSERT_TRUE(client->put("/k", "v").ok());
  // A kept lease and a key on it must come through the outage too.
  auto keeper = LeaseKeeper::start(client, LeaseKeeperOptions{.ttl_seconds = 5});
  ASSERT_TRUE(keeper.ok()) << keeper.error().message;
  ASSERT_TRUE(client->put("/leased", "v", (*keeper)->lease_id()).ok());

  etcd.kill();
  // Several calls while down: each fails with kUnavailable long before the
  // 3 s deadline, and the state change is reported once.
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = client->get("/k");
    auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, EtcdErrc::kUnavailable) << r.error().message;
    EXPECT_NE(r.error().message.find(etcd.endpoint()), std::string::npos) << r.error().message;
    EXPECT_LT(took, 2500ms) << "call hung instead of failing fast";
  }
  EXPECT_FALSE(client->reachable());
  EXPECT_EQ(changes.load(), 1);

  ASSERT_TRUE(etcd.start()) << etcd.log();
  std::string last_error;
  ASSERT_TRUE(cgn::testing::wait_until(
      [&] {
        auto r = client->get("/k");
        if (!r) {
          last_error = r.error().message;
        }
        return r.ok();
      },
      15s, 50ms))
      << last_error << "\n"
      << etcd.log();
  EXPECT_EQ(client->get("/k")->kvs.at(0).value, "v");
  EXPECT_TRUE(client->reachable());
  EXPECT_EQ(changes.load(), 2);

  // The keeper reconnects on its own and renews the same lease.
  const uint64_t acked = (*keeper)->keepalives_acked();
  ASSERT_TRUE(cgn::testing::wait_until([&] { return (*keeper)->keepalives_acked() > acked; }, 15s));
  EXPECT_NE((*keeper)->lease_id(), 0);
  EXPECT_EQ(client->get("/leased")->kvs.size(), 1u);
}

TEST(EtcdClient, fails_over_to_a_working_endpoint) {
  // The first endpoint refuses connections; reads move on to the second.
  const std::string dead = "127.0.0.1:" + std::to_string(cgn::testing::free_port());
  EtcdClientOptions o;
  o.endpoints = {dead, "http://" + shared_etcd().endpoint()};
  auto client = EtcdClient::create(o).value();
  auto st = client->status();
  ASSERT_TRUE(st.ok()) << st.error().message;
  // The next write starts at the endpoint that worked.
  EXPECT_TRUE(client->put(test_prefix() + "k", "v").ok());
}

}  // namespace
}  // namespace cgn::etcd
