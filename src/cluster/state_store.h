// StateStore: where the router learns which nodes exist and how they are doing (docs/design/principles.md).
// One small interface with one implementation per backend (src/state/<name>/), registered by the
// name used in cognitora.toml's `state_backend` (backend_registry.h). The router never talks to a backend
// directly; it hands the store a sink and applies what arrives to its RoutingCore.
//
// Thread-safety: start()/stop() are for the owning thread. The sink is called from the store's
// own thread(s), one call at a time, and must not call back into the store.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/digest_types.h"
#include "core/metrics.h"
#include "core/result.h"
#include "routing/node_state.h"

namespace cgn::cluster {

enum class StateError {
  kConfig,  // the backend's configuration is unusable (bad URL, duplicate node name, ...)
  kStart,   // the backend could not start (thread, socket)
};

const char* to_string(StateError e);

// How to reach a node's OpenAI-compatible HTTP endpoint.
struct NodeEndpoint {
  std::string host;
  uint16_t port = 0;
  bool tls = false;
  std::string base_path;  // URL path prefix ("" or "/engine-a"), never ending in '/'
  // The node is a cgn-agent (etcd, gossip, or a static node with `agent`): it answers "100 Continue"
  // and the router presents the cluster token to it. A bare OpenAI endpoint gets neither.
  bool agent = false;
};

// Parses "http://host:port[/path]" or "https://..." (port defaults 80/443; IPv6 in brackets).
Result<NodeEndpoint, StateError> parse_node_url(std::string_view url);

// What a backend reports. Static: kUpsert/kRemove only. etcd: all kinds.
struct NodeEvent {
  enum class Kind {
    kUpsert,    // node added or changed (cordon flags arrive here, as update.cordoned)
    kRemove,    // node gone: drop it and everything the index holds for it
    kPrefixes,  // live KV prefixes of node `id`: `confirmed` now held, `removed` no longer held
    kPolicy,    // routing policy, weights and admission to apply now (`policy`)
    kBackend,   // the backend's connection changed (`connected`); the last-known state stays
  };
  Kind kind = Kind::kUpsert;
  std::string id;         // node name (unique per cluster); empty for kPolicy / kBackend
  NodeEndpoint endpoint;  // kUpsert: where to send requests
  routing::NodeUpdate update;
  routing::UpdateSource source = routing::UpdateSource::kStatic;
  std::vector<Digest> confirmed;  // kPrefixes
  // kPrefixes: where the node holds `confirmed` (engine, or its cgn-kvcached RAM / SSD tier).
  routing::Tier tier = routing::Tier::kEngine;
  std::vector<Digest> removed;  // kPrefixes
  // kPolicy: [router] policy, routing and admission to apply (the rest is ignored, as on SIGHUP).
  std::shared_ptr<const config::RouterConfig> policy;
  std::string policy_origin;  // kPolicy: where it came from, for the log ("etcd revision 42")
  bool connected = true;      // kBackend
};

const char* to_string(NodeEvent::Kind k);

using NodeSink = std::function<void(const NodeEvent&)>;

class StateStore {
 public:
  virtual ~StateStore() = default;
  // Begins delivering node events to `sink`: every known node at least once promptly, then
  // changes as they happen. Returns an error when the backend cannot run at all.
  virtual Status<StateError> start(NodeSink sink) = 0;
  // Stops delivering; no sink call is running or will run once it returns. Idempotent.
  virtual void stop() = 0;
  // The backend's registered name ("static", "etcd", "gossip").
  virtual std::string_view backend() const = 0;
  // Exports the backend's own counters (gossip: cgn_gossip_*) into `registry` (the router's
  // /metrics). Call before start(); the registry must outlive the store. Default: none.
  virtual void attach_metrics(metrics::Registry& /*registry*/) {}
};

}  // namespace cgn::cluster
