// EtcdStore: the "etcd" state backend of the router (docs/design/principles.md, docs/architecture/etcd.md).
// One PrefixMirror of the whole root (`/cognitora/`) gives one ordered stream of puts and deletes,
// through etcd restarts and compaction; EtcdStateView turns it into NodeEvents:
//
//   /cognitora/nodes/<node>           node record JSON -> kUpsert (endpoint = the record's
//                                     address), delete (lease expiry) -> kRemove
//   /cognitora/kv/<node>/<digest hex> -> kPrefixes confirmed; delete -> kPrefixes removed
//   /cognitora/cordon/<node>          present (any value but false/0/no/off) -> the node's
//                                     kUpsert carries cordoned = true; delete -> false
//   /cognitora/policy                 a cognitora.toml text; its [router] policy, routing and
//                                     admission apply (kPolicy), validated like a SIGHUP reload;
//                                     a bad value is logged and ignored; delete -> back to the
//                                     router's own configuration
//
// Prefixes of a node the router does not know yet are kept and confirmed when its record
// arrives. A /kv/ value is the kv_epoch the agent published the digest under: only digests of
// the node's current epoch are confirmed (a new-epoch digest that arrives before the record
// that announces the epoch waits for it). A kv_epoch change voids the node's index entries
// (RoutingCore::upsert_node) and re-confirms the digests of the new epoch; for values that name
// no epoch, those written after the new record. Node removal drops everything for the node.
// While etcd is unreachable nothing is removed: the router keeps routing on the last-known state
// (kBackend reports the change) and the mirror reconciles when etcd returns, with no duplicates.
//
// Threads: EtcdStateView is single-threaded (pure, unit-tested). EtcdStore runs the mirror's
// threads and calls the sink from them, one call at a time (a mutex also serialises the
// reachability callback).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/node_record.h"
#include "cluster/state_store.h"
#include "core/config.h"
#include "core/log.h"
#include "state/etcd/etcd_client.h"

namespace cgn::etcd {
class EtcdClient;
class PrefixMirror;
}  // namespace cgn::etcd

namespace cgn::state {

// The policy value: a cognitora.toml text, validated exactly as the file is on SIGHUP (unknown
// keys and bad values are errors). `origin` names it in messages.
Result<config::RouterConfig, cluster::StateError> parse_policy_value(std::string_view text,
                                                                     const std::string& origin);

// "true" unless the value says false ("false", "0", "no", "off", any case, spaces trimmed).
bool cordon_value(std::string_view value);

class EtcdStateView {
 public:
  // root: the key root without a trailing '/' ("/cognitora"). base: the policy in force while
  // the policy key is absent.
  EtcdStateView(std::string root, config::RouterConfig base, cluster::NodeSink sink);

  void put(std::string_view key, std::string_view value, int64_t mod_revision);
  void del(std::string_view key, int64_t revision);

  size_t nodes() const { return nodes_.size(); }
  // Digests mirrored for `node` (known or not).
  size_t prefixes(std::string_view node) const;
  bool cordoned(std::string_view node) const;
  // Values that could not be used (bad JSON, wrong id, bad policy), for tests.
  uint64_t rejected() const { return rejected_; }

 private:
  struct Node {
    cluster::NodeRecord record;
    cluster::NodeEndpoint endpoint;
    int64_t mod_revision = 0;
  };
  enum class KeyKind { kNode, kKv, kCordon, kPolicy, kOther };

  void emit_upsert(const std::string& id, const Node& n);
  bool is_cordoned(const std::string& id) const;
  // After node `id`'s cordon key changed (`before`: whether it was cordoned): logs the state and
  // sends the node again when its cordon flipped.
  void cordon_changed(const std::string& id, bool before);
  void reject(std::string_view key, std::string_view why);

  std::string root_;  // "/cognitora/"
  config::RouterConfig base_;
  cluster::NodeSink sink_;
  log::Logger log_;
  log::StateChangeLogger changes_;
  std::map<std::string, Node, std::less<>> nodes_;
  // One mirrored /kv/ key: its revision and the kv_epoch its value names (agents write the epoch
  // they published under; a value that is not a number has none).
  struct Held {
    int64_t mod_revision = 0;
    std::optional<uint64_t> epoch;
    routing::Tier tier = routing::Tier::kEngine;  // where the value says the node holds it
    bool confirmed = false;                       // told the core the node holds it
  };
  // A new node or a new epoch: confirms every mirrored digest of `id` that is current, one event
  // per tier.
  void reconfirm(const std::string& id, const Node& n, int64_t since_revision);
  void put_kv(std::string_view key, std::string_view rel_kv, std::string_view value, int64_t mod_revision);
  // Whether `h` belongs to what `n` holds now: same epoch when the value names one; else
  // written after `since_revision`.
  static bool current(const Held& h, const Node& n, int64_t since_revision);

  std::map<std::string, std::map<Digest, Held>, std::less<>> kv_;
  std::map<std::string, bool, std::less<>> cordon_;  // key present: its flag
  uint64_t rejected_ = 0;
};

struct EtcdStoreOptions {
  std::vector<std::string> endpoints;  // "http://host:port", "https://host:port" or "host:port"
  // TLS files and auth for the client ([state.etcd]; etcd_client.h); its endpoints are `endpoints`.
  etcd::EtcdClientOptions client;
  std::string root = "/cognitora";  // [state.etcd] prefix
  config::RouterConfig base;        // the router's own policy (used while /policy is absent)
};

class EtcdStore final : public cluster::StateStore {
 public:
  static Result<std::unique_ptr<EtcdStore>, cluster::StateError> create(EtcdStoreOptions options);
  ~EtcdStore() override;

  Status<cluster::StateError> start(cluster::NodeSink sink) override;
  void stop() override;
  std::string_view backend() const override { return "etcd"; }

  // The first full read of the root has been applied.
  bool synced() const;
  bool connected() const { return connected_.load(std::memory_order_relaxed); }

 private:
  explicit EtcdStore(EtcdStoreOptions options);

  EtcdStoreOptions options_;
  std::shared_ptr<etcd::EtcdClient> client_;
  std::unique_ptr<etcd::PrefixMirror> mirror_;
  std::mutex sink_mu_;  // serialises view_ and sink calls (mirror threads, reachability callback)
  std::unique_ptr<EtcdStateView> view_;
  cluster::NodeSink sink_;
  std::atomic<bool> connected_{true};
  std::atomic<bool> stopping_{false};
  bool started_ = false;
};

}  // namespace cgn::state
