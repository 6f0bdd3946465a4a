// Publishes this node to etcd (docs/design/principles.md, docs/agent.md "Publishing to etcd"): the node
// record under <prefix>/nodes/<node> and the live KV prefixes under <prefix>/kv/<node>/<hex>
// (value: the kv_epoch, or {"epoch":N,"tier":"ram"|"ssd"} for a prefix only cgn-kvcached holds)
// (prefix: [state.etcd] prefix, default /cognitora),
// all on one heartbeat lease kept alive by a LeaseKeeper. Every flush interval it writes at most
// one txn (split only past etcd's 128 ops) holding just the changes: the record when it changed,
// puts of new prefixes, deletes of evicted ones. A kv_epoch change deletes the node's whole KV
// prefix in the same txn as the record that carries the new epoch.
//
// Outage: writes that fail are kept and retried; the agent's data path never waits on etcd. The
// state change (reachable / unreachable / lease lost) is logged once. When etcd answers again
// the publisher reconciles: re-grants the lease if it was lost, reads the node's keys, and writes
// the record and the whole current set, deleting keys it no longer holds (no duplicates, nothing
// stale).
//
// Threads: one publisher thread (flushes) plus the LeaseKeeper's. record_prefixes() and the
// counters are safe from any thread (the data path calls them); start()/stop() belong to the
// owner.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "cluster/kv_publish_set.h"
#include "cluster/node_record.h"
#include "core/log.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/lease_keeper.h"

namespace cgn::state {

struct PublisherOptions {
  std::string node_id;  // must pass etcd::keys::check_node_id
  // [state.etcd] prefix: the root of the key layout ("/lab" -> /lab/nodes/<node>, /lab/kv/...),
  // the one the routers watch. Trailing slashes are ignored.
  std::string prefix = "/cognitora";
  std::chrono::milliseconds flush_interval{250};
  int64_t lease_ttl_s = 5;
  size_t max_prefixes = cluster::kMaxPublishedPrefixes;     // the 4096-key cap (lower for tests)
  uint32_t block_bytes = 256;                               // digest block size, for the capacity rule
  double pressure_threshold = 0.05;                         // prune when free blocks < 5% of the pool ...
  double pressure_prune_fraction = 0.10;                    // ... this share of the set, oldest first ...
  std::chrono::milliseconds pressure_prune_interval{1000};  // ... at most this often
  // Polled once per flush: the record to publish (NodeAgent::record()). Must be thread-safe.
  std::function<cluster::NodeRecord()> record_source;
};

// Counters, for /metrics, benchmarks and tests.
struct PublisherStats {
  uint64_t flushes = 0;       // flush intervals that wrote anything (each: one txn, split past 128 ops)
  uint64_t txns = 0;          // txns sent and acknowledged
  uint64_t failed_txns = 0;   // txns that failed (kept for retry)
  uint64_t keys_put = 0;      // KV-prefix keys written
  uint64_t keys_deleted = 0;  // KV-prefix keys deleted one by one (epoch clears not counted)
  uint64_t record_puts = 0;
  uint64_t epoch_clears = 0;
  uint64_t reconciles = 0;    // full syncs (start, after an outage or a lost lease)
  uint64_t lease_grants = 0;  // the first one included
  uint64_t pressure_prunes = 0;
  uint64_t kv_event_clears = 0;       // AllBlocksCleared / sequence gaps: every prefix withdrawn
  uint64_t kv_event_withdrawals = 0;  // BlockRemoved batches that withdrew oldest digests
  uint64_t kv_event_withdrawn = 0;    // digests those withdrew
  uint64_t residency_changes = 0;     // tier entries added, re-tiered or dropped (record_residency)
  bool connected = false;             // the last etcd call succeeded
  // Longest time seen (sampled at each flush) since etcd last confirmed the lease: a lease stall
  // is this growing past ~2/3 of the TTL (two keep-alives missed).
  std::chrono::milliseconds max_lease_ack_age{0};
  int64_t lease_id = 0;
  size_t published = 0;  // entries in the set now
  size_t capacity = 0;
};

class EtcdPublisher {
 public:
  EtcdPublisher(std::shared_ptr<etcd::EtcdClient> client, PublisherOptions options);
  ~EtcdPublisher();  // stop(false)
  EtcdPublisher(const EtcdPublisher&) = delete;
  EtcdPublisher& operator=(const EtcdPublisher&) = delete;

  // Starts the publisher thread; never waits for etcd (an outage at start is an outage).
  void start();
  // Stops flushing. revoke: drop the lease now so the node vanishes at once (graceful
  // shutdown); otherwise its keys live out the TTL (what a crash looks like).
  void stop(bool revoke);

  // A completed request's prefix chain (digest 0..n-1): now held by the engine. Any thread.
  void record_prefixes(std::span<const Digest> chain);
  // The engine's KV events asked to withdraw prefixes (agent/kv_events.h plan_withdrawal; docs/agent.md
  // "KV events"): all = every published prefix (the next flush deletes the node's KV keys);
  // removed_blocks = the oldest digests covering that many engine blocks. Any thread.
  void withdraw(const cluster::KvWithdrawal& w);
  // The node's cgn-kvcached residency (cluster::PublishedSet::set_residency): published under
  // the same keys, cap and flush interval, with a tier value ({"epoch":N,"tier":"ram"}). Any
  // thread.
  void record_residency(std::span<const std::pair<Digest, routing::Tier>> resident,
                        std::span<const Digest> gone);
  PublisherStats stats() const;

 private:
  // The value of the i-th put: the epoch, and the tier where it is not the engine.
  std::string put_value(const cluster::PrefixChanges& c, size_t i) const;
  void run();
  void flush_once();
  bool ensure_lease();
  bool full_sync(const std::string& record_json);
  bool incremental(const std::string& record_json);
  void set_connected(bool ok, const std::string& why);
  // A batch etcd refused (called with mu_ held): counted; a lost lease is noted for the next flush.
  void batch_failed(const etcd::EtcdError& e);
  void update_from_record(const cluster::NodeRecord& rec);

  std::string node_key() const;
  std::string kv_prefix() const;  // "<prefix>/kv/<node>/"
  std::string kv_key(const Digest& d) const;

  std::shared_ptr<etcd::EtcdClient> client_;
  PublisherOptions options_;
  std::string root_;  // options_.prefix with exactly one trailing '/'
  log::Logger log_;
  log::StateChangeLogger changes_;

  mutable std::mutex mu_;  // guards set_, stats_ and the fields marked below
  std::condition_variable cv_;
  bool stopping_ = false;
  cluster::PublishedSet set_;
  PublisherStats stats_;

  // Publisher thread only.
  std::unique_ptr<etcd::LeaseKeeper> lease_;
  bool need_full_sync_ = true;
  std::string last_record_json_;
  std::optional<uint64_t> last_epoch_;
  uint32_t engine_block_tokens_ = 0;  // the record's block_size (guarded by mu_)
  std::chrono::steady_clock::time_point last_prune_{};
  std::atomic<bool> lease_lost_{false};
  std::thread thread_;
};

}  // namespace cgn::state
