// The "gossip" state backend (docs/design/principles.md, docs/architecture/gossip.md).
//
// GossipStore: the router's side. It joins the cluster as a member without a record and, every
// `reconcile_interval` (2.5 s), turns the live members that carry a node record (key "record",
// the agent's JSON, agent/node_record.h) into NodeEvents: kUpsert when a record appears or
// changes, kRemove when its member dies, is forgotten or deletes the record. A member without a
// record (another router) is not a node.
//
// RecordPublisher: the agent's side. It joins as the member named after the node id and
// publishes record_json() under "record" every `interval` (a new version only when it changed).
//
// Threads: each owns a GossipNode (one socket thread) plus one loop thread; the sink is called
// from the store's loop thread. start()/stop() belong to the owning thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/state_store.h"
#include "core/config.h"
#include "state/gossip/gossip_probe.h"
#include "state/gossip/udp_node.h"

namespace cgn::gossip {

inline constexpr const char* kRecordKey = "record";  // the node record without its load fields
inline constexpr const char* kLoadKey = "load";      // the fields that change with every scrape

// The record JSON split into its identity part (kRecordKey: changes rarely) and its load part
// (kLoadKey: free_blocks, queue_depth, running, power_watts, energy_joules, kv_epoch, ready, total_blocks),
// so a scrape gossips ~100 bytes instead of the whole record. Input that is not a JSON object is kept whole
// in the identity part.
std::pair<std::string, std::string> split_record(const std::string& json);
// The inverse: the load fields laid over the identity part.
std::string merge_record(const std::string& identity, const std::string& load);

// NodeOptions from [state.gossip] for member `name`; the generation is the start time (Unix ns),
// so a restarted process supersedes its old incarnation.
Result<NodeOptions, NodeError> node_options_from_config(const config::GossipConfig& cfg, std::string name);

// Features configured that gossip cannot carry (etcd only), each named with its keys; empty when
// none. The callers log one warning per entry at startup.
std::vector<std::string> etcd_only_features(const config::CognitoraConfig& cfg);

// The events one reconcile pass produces: `known` (node -> record JSON last delivered) is updated.
// Pure; exposed for tests.
std::vector<cluster::NodeEvent> reconcile(const std::vector<MemberView>& members,
                                          std::map<std::string, std::string>& known);

struct GossipStoreOptions {
  NodeOptions node;
  std::chrono::milliseconds reconcile_interval{2500};
};

class GossipStore final : public cluster::StateStore {
 public:
  static Result<std::unique_ptr<GossipStore>, cluster::StateError> create(GossipStoreOptions options);
  ~GossipStore() override;

  Status<cluster::StateError> start(cluster::NodeSink sink) override;
  void stop() override;
  std::string_view backend() const override { return "gossip"; }

  // Exports cgn_gossip_* into `registry` (the router's). Call before start(); the registry must
  // outlive the store.
  void attach_metrics(metrics::Registry& registry) override;
  const GossipNode& node() const { return *node_; }

 private:
  explicit GossipStore(GossipStoreOptions options, std::unique_ptr<GossipNode> node);
  void loop();

  GossipStoreOptions options_;
  std::unique_ptr<GossipNode> node_;
  std::unique_ptr<GossipProbe> probe_;
  cluster::NodeSink sink_;
  std::map<std::string, std::string> known_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
  bool started_ = false;
};

class RecordPublisher {
 public:
  RecordPublisher(std::unique_ptr<GossipNode> node, std::function<std::string()> record_json,
                  std::chrono::milliseconds interval = std::chrono::milliseconds(1000));
  ~RecordPublisher();
  RecordPublisher(const RecordPublisher&) = delete;
  RecordPublisher& operator=(const RecordPublisher&) = delete;

  Result<uint16_t, NodeError> start();
  void stop();
  GossipNode& node() { return *node_; }

 private:
  void publish();

  std::unique_ptr<GossipNode> node_;
  std::function<std::string()> record_json_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// Wiring for the binaries (each a few lines in main.cpp). Both log one warning per etcd-only
// feature configured (etcd_only_features) and an info line saying what gossip carries.
//
// The router's store: member "router-<host>-<pid>", no record; call attach_metrics() with the
// router's registry before the gateway starts it.
Result<std::unique_ptr<GossipStore>, cluster::StateError> make_router_store(
    const config::CognitoraConfig& cfg);
// The agent's publisher, started: member `node_id`, publishing record_json() every second.
Result<std::unique_ptr<RecordPublisher>, NodeError> start_agent_publisher(
    const config::CognitoraConfig& cfg, const std::string& node_id, std::function<std::string()> record_json);

}  // namespace cgn::gossip
