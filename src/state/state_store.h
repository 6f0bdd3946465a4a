// StateStore: where the router learns which nodes exist and how they are doing (DESIGN.md §6).
// One small interface with one implementation per backend, registered by the name used in
// cognitora.toml's `state_backend`: "static" (static_store.h, this folder), "etcd" and "gossip"
// (later issues). The router never talks to a backend directly; it hands the store a sink and
// applies what arrives to its RoutingCore.
//
// Thread-safety: start()/stop() are for the owning thread. The sink is called from the store's
// own thread(s), one call at a time, and must not call back into the store.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "routing/node_state.h"

namespace cgn::state {

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
};

// Parses "http://host:port[/path]" or "https://..." (port defaults 80/443; IPv6 in brackets).
Result<NodeEndpoint, StateError> parse_node_url(std::string_view url);

struct NodeEvent {
  enum class Kind { kUpsert, kRemove };
  Kind kind = Kind::kUpsert;
  std::string id;         // node name (unique per cluster)
  NodeEndpoint endpoint;  // kUpsert: where to send requests
  routing::NodeUpdate update;
  routing::UpdateSource source = routing::UpdateSource::kStatic;
};

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
};

}  // namespace cgn::state
