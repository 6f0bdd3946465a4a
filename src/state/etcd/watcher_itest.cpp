// Watch streams and the prefix mirror against a real etcd, through restarts
// and compaction.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "state/etcd/etcd_client.h"
#include "state/etcd/itest_util.h"
#include "state/etcd/lease_keeper.h"
#include "state/etcd/prefix_mirror.h"
#include "state/etcd/watcher.h"
#include "testing/etcd_server.h"
#include "testing/process.h"

namespace cgn::etcd {
namespace {

using namespace std::chrono_literals;
using cgn::testing::wait_until;
using itest::make_client;
using itest::reconnected;
using itest::shared_etcd;
using itest::test_prefix;

// Collects what a watcher delivers, for assertions from the test thread.
struct Recorder {
  std::mutex mu;
  std::vector<WatchEvent> events;
  std::vector<int64_t> resyncs;

  WatchCallback callback() {
    return [this](const WatchUpdate& up) {
      std::lock_guard<std::mutex> lock(mu);
      if (up.kind == WatchUpdate::Kind::kResyncNeeded) {
        resyncs.push_back(up.compact_revision);
      }
      for (const auto& e : up.events) {
        events.push_back(e);
      }
    };
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return events.size();
  }
  std::vector<WatchEvent> copy() {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  }
};

TEST(Watcher, delivers_puts_and_deletes_in_order_with_revisions) {
  auto client = make_client(shared_etcd().endpoint());
  const std::string p = test_prefix();
  auto start = client->get_prefix(p);
  ASSERT_TRUE(start.ok());
  Recorder rec;
  auto w = Watcher::prefix(client, p, start->revision + 1, rec.callback());

  std::vector<int64_t> revs;
  for (int i = 0; i < 20; ++i) {
    revs.push_back(client->put(p + std::to_string(i % 5), fmt::format("v{}", i))->revision);
  }
  revs.push_back(client->del(p + "3")->revision);
  ASSERT_TRUE(client->put("/elsewhere/" + p, "not watched").ok());
  // One txn, two keys: two events sharing one revision, both delivered.
  TxnRequest both;
  both.success = {TxnOp::put(p + "t1", "x"), TxnOp::put(p + "t2", "y")};
  const int64_t txn_rev = client->txn(both)->revision;

  ASSERT_TRUE(wait_until([&] { return rec.size() >= 23; }, 10s)) << rec.size();
  auto got = rec.copy();
  ASSERT_EQ(got.size(), 23u);
  EXPECT_EQ(got[21].kv.key, p + "t1");
  EXPECT_EQ(got[22].kv.key, p + "t2");
  EXPECT_EQ(got[21].kv.mod_revision, txn_rev);
  EXPECT_EQ(got[22].kv.mod_revision, txn_rev);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(got[i].type, WatchEvent::Type::kPut);
    EXPECT_EQ(got[i].kv.key, p + std::to_string(i % 5));
    EXPECT_EQ(got[i].kv.value, fmt::format("v{}", i));
    EXPECT_EQ(got[i].kv.mod_revision, revs[i]);
  }
  EXPECT_EQ(got[20].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(got[20].kv.key, p + "3");
  EXPECT_EQ(got[20].kv.mod_revision, revs[20]);
  EXPECT_EQ(w->next_revision(), txn_rev + 1);
}

TEST(Watcher, moves_to_the_next_endpoint_when_the_first_is_down) {
  // Endpoint 1 refuses connections; the watch and a lease keeper must still
  // work through endpoint 2.
  EtcdClientOptions o;
  o.endpoints = {"127.0.0.1:" + std::to_string(cgn::testing::free_port()), shared_etcd().endpoint()};
  auto client = EtcdClient::create(o).value();
  auto writer = make_client(shared_etcd().endpoint());
  const std::string p = test_prefix();
  const int64_t from = writer->get(p)->revision + 1;
  Recorder rec;
  auto w = Watcher::prefix(client, p, from, rec.callback());
  ASSERT_TRUE(wait_until([&] { return w->connected(); }, 10s));
  ASSERT_TRUE(writer->put(p + "a", "1").ok());
  ASSERT_TRUE(wait_until([&] { return rec.size() == 1; }, 10s));

  auto keeper = LeaseKeeper::start(client, LeaseKeeperOptions{.ttl_seconds = 2});
  ASSERT_TRUE(keeper.ok()) << keeper.error().message;
  EXPECT_TRUE(wait_until([&] { return (*keeper)->keepalives_acked() >= 2; }, 10s));
}

TEST(Watcher, resumes_after_etcd_restart_without_loss_or_duplicates) {
  cgn::testing::EtcdServer etcd;
  ASSERT_TRUE(etcd.start()) << etcd.log();
  auto client = make_client(etcd.endpoint());
  // The test writes through etcd's second port, which the watcher never uses.
  auto admin = make_client(etcd.admin_endpoint());
  const std::string p = "/w/";
  Recorder rec;
  auto w = Watcher::prefix(client, p, 0, rec.callback());
  ASSERT_TRUE(wait_until([&] { return w->connected(); }, 10s));

  int n = 0;
  auto put_some = [&](int count) {
    ASSERT_TRUE(reconnected(*admin));
    for (int i = 0; i < count; ++i, ++n) {
      auto r = admin->put(p + std::to_string(n), std::to_string(n));
      ASSERT_TRUE(r.ok()) << r.error().message;
    }
  };
  put_some(10);
  ASSERT_TRUE(wait_until([&] { return rec.size() == 10; }, 10s));

  // Clean restart, with writes made while the watcher's endpoint is closed.
  etcd.stop();
  ASSERT_TRUE(wait_until([&] { return !w->connected(); }, 10s));
  ASSERT_TRUE(etcd.start(20s, /*serve_endpoint=*/false)) << etcd.log();
  put_some(10);
  etcd.stop();
  ASSERT_TRUE(etcd.start()) << etcd.log();
  put_some(10);
  ASSERT_TRUE(wait_until([&] { return rec.size() >= 30; }, 15s)) << rec.size();

  // A crash (SIGKILL) with writes in the gap, then more after it returns.
  etcd.kill();
  ASSERT_TRUE(etcd.start(20s, /*serve_endpoint=*/false)) << etcd.log();
  put_some(5);
  etcd.kill();
  ASSERT_TRUE(etcd.start()) << etcd.log();
  put_some(5);

  ASSERT_TRUE(wait_until([&] { return rec.size() >= 40; }, 15s)) << rec.size();
  auto got = rec.copy();
  ASSERT_EQ(got.size(), 40u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].kv.key, p + std::to_string(i)) << "lost, duplicated or reordered at " << i;
    if (i > 0) {
      EXPECT_EQ(got[i].kv.mod_revision, got[i - 1].kv.mod_revision + 1) << "gap at " << i;
    }
  }
  EXPECT_GE(w->reconnects(), 2u);
  EXPECT_TRUE(wait_until([&] { return w->connected(); }, 10s));
}

TEST(Watcher, reports_resync_needed_when_its_revision_was_compacted) {
  auto client = make_client(shared_etcd().endpoint());
  const std::string p = test_prefix();
  const int64_t old_rev = client->put(p + "a", "1")->revision;
  const int64_t now = client->put(p + "a", "2")->revision;
  ASSERT_TRUE(client->compact(now).ok());

  Recorder rec;
  auto w = Watcher::prefix(client, p, old_rev, rec.callback());
  ASSERT_TRUE(wait_until([&] { return w->finished(); }, 10s));
  std::lock_guard<std::mutex> lock(rec.mu);
  ASSERT_EQ(rec.resyncs.size(), 1u);
  EXPECT_EQ(rec.resyncs[0], now);
  EXPECT_TRUE(rec.events.empty());
}

// A consumer that keeps its own map from the mirror's callbacks.
struct Consumer {
  std::mutex mu;
  std::map<std::string, std::string> map;
  int resets = 0;

  MirrorCallbacks callbacks() {
    MirrorCallbacks cb;
    cb.on_put = [this](const KeyValue& kv) {
      std::lock_guard<std::mutex> lock(mu);
      map[kv.key] = kv.value;
    };
    cb.on_delete = [this](const std::string& key, int64_t) {
      std::lock_guard<std::mutex> lock(mu);
      map.erase(key);
    };
    cb.on_reset = [this](int64_t) {
      std::lock_guard<std::mutex> lock(mu);
      ++resets;
    };
    return cb;
  }
  std::map<std::string, std::string> copy() {
    std::lock_guard<std::mutex> lock(mu);
    return map;
  }
};

std::map<std::string, std::string> etcd_map(EtcdClient& client, const std::string& p) {
  std::map<std::string, std::string> out;
  auto read = client.get_prefix(p);
  if (!read) {
    return out;
  }
  for (const auto& kv : read->kvs) {
    out[kv.key] = kv.value;
  }
  return out;
}

TEST(PrefixMirror, converges_through_restart_and_compaction) {
  cgn::testing::EtcdServer etcd;
  ASSERT_TRUE(etcd.start()) << etcd.log();
  auto client = make_client(etcd.endpoint());
  auto admin = make_client(etcd.admin_endpoint());
  const std::string p = "/cognitora/nodes/";
  ASSERT_TRUE(admin->put(p + "before", "1").ok());

  Consumer consumer;
  PrefixMirror mirror(client, p, consumer.callbacks());
  ASSERT_TRUE(wait_until([&] { return mirror.synced(); }, 10s));
  EXPECT_EQ(consumer.copy(), etcd_map(*admin, p));

  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(admin->put(p + "n" + std::to_string(i), "v").ok());
  }
  ASSERT_TRUE(admin->del(p + "before").ok());
  ASSERT_TRUE(wait_until([&] { return consumer.copy() == etcd_map(*admin, p); }, 10s));

  // Restart with changes in the gap: the watch resumes, no re-read needed.
  etcd.stop();
  ASSERT_TRUE(etcd.start(20s, /*serve_endpoint=*/false)) << etcd.log();
  ASSERT_TRUE(reconnected(*admin));
  ASSERT_TRUE(admin->put(p + "n0", "while-away").ok());
  etcd.stop();
  ASSERT_TRUE(etcd.start()) << etcd.log();
  ASSERT_TRUE(reconnected(*admin));
  ASSERT_TRUE(wait_until([&] { return consumer.copy() == etcd_map(*admin, p); }, 10s));
  EXPECT_EQ(mirror.resyncs(), 0u);
  const int resets_before = [&] {
    std::lock_guard<std::mutex> lock(consumer.mu);
    return consumer.resets;
  }();

  // Changes and a compaction past the mirror's revision while it is cut off:
  // its resume revision is gone, so it must re-read and diff.
  etcd.stop();
  ASSERT_TRUE(etcd.start(20s, /*serve_endpoint=*/false)) << etcd.log();
  ASSERT_TRUE(reconnected(*admin));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(admin->put(p + "n" + std::to_string(i), "rewritten").ok());
  }
  ASSERT_TRUE(admin->del(p + "n9").ok());
  const int64_t last = admin->put(p + "new", "x")->revision;
  ASSERT_TRUE(admin->compact(last).ok());
  etcd.stop();
  ASSERT_TRUE(etcd.start()) << etcd.log();
  ASSERT_TRUE(reconnected(*admin));

  ASSERT_TRUE(wait_until([&] { return consumer.copy() == etcd_map(*admin, p); }, 15s))
      << "mirror did not converge after compaction";
  EXPECT_EQ(mirror.resyncs(), 1u);
  {
    std::lock_guard<std::mutex> lock(consumer.mu);
    EXPECT_EQ(consumer.resets, resets_before + 1);
  }
  EXPECT_EQ(mirror.snapshot().size(), consumer.copy().size());
  EXPECT_EQ(mirror.get(p + "new")->value, "x");
  EXPECT_FALSE(mirror.get(p + "n9").has_value());
  EXPECT_GE(mirror.revision(), last);
}

}  // namespace
}  // namespace cgn::etcd
