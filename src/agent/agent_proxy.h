// The agent's data path (docs/design/principles.md): an HTTP server in front of the engine. Requests under
// /v1/ are forwarded to the engine with their body untouched (hop-by-hop headers dropped);
// answers come back as they are: SSE re-serialised event by event, the events of each engine
// read in one flushed chunk (headers with the first, the end with the last), other streamed
// bodies piece by piece. A client that goes away cancels the engine request (the client's operations run in
// the handler's coroutine). /health answers from the supervisor's view of the engine;
// /metrics serves the agent's own metrics and, optionally, the engine's exposition after them.
//
// After a successful chat or completions request (status 200 and, for a stream, a clean end)
// the proxy computes the request's prefix digests and those of request + generated reply
// (append_assistant_message; for streams the content and tool-call deltas are accumulated) and
// hands the chain to the recorder (the etcd publisher's live KV prefix set). The digests are
// computed after the last byte went to the client, on the proxy's digest thread (not the
// worker), so they add nothing to the request's latency nor to the next one's; stop() waits for
// the queued ones.
//
// Threads: the HTTP server's workers; one HttpClient (engine connection pool) per worker, used
// only there; one digest thread (when there is a recorder). The recorder is called from the
// digest thread (from a worker while more than 1024 chains wait), the health callback from
// workers: both must be thread-safe. start()/stop() belong to the owner.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/canonical.h"
#include "core/cluster_token.h"
#include "core/config.h"
#include "core/digest_types.h"
#include "core/http/client.h"
#include "core/http/server.h"
#include "core/metrics.h"

namespace cgn::agent {

struct EngineHealth {
  bool ready = false;
  std::string state;  // the supervisor's EngineState name: "ready", "starting", ...
};

// kv_offload = "cgn": for a completions / chat body, the prompt's chain in the engine's block
// naming and the leading run of it the node's cgn-kvcached holds, from the agent's last
// BatchLookup (agent/kv_residency.h); never waits on kvcached. Empty prefix: nothing to add.
struct KvHints {
  std::vector<Digest> prefix;
  std::vector<Digest> resident;
};
using KvHintsFn = std::function<KvHints(std::string_view path, std::string_view body)>;

struct AgentProxyOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 9090;  // 0: the kernel picks (tests)
  size_t threads = 2;
  std::string node_id;
  http::Upstream engine{"127.0.0.1", 8000, false};
  std::string engine_metrics_path;  // relayed after the agent's own /metrics; empty: not relayed
  uint32_t block_bytes = 256;       // digest block size ([router.routing] block_bytes)
  std::chrono::milliseconds connect_timeout{2000};
  // Whole-request bound when the router sends no X-CGN-Deadline-Ms.
  std::chrono::milliseconds request_timeout{600000};
  std::chrono::milliseconds idle_timeout{60000};  // gap between streamed pieces
  size_t max_body_bytes = 16 * 1024 * 1024;
  // [cluster]: /v1/* requests must carry one of these tokens (X-CGN-Cluster-Token), which the
  // router presents; refused with 401 otherwise. The header never reaches the engine.
  auth::ClusterToken cluster_token;
  // [tls]: the listener serves TLS with this certificate; with require_client_cert every client
  // must present a certificate the CA verifies, which then stands in for the token.
  config::TlsConfig tls;
  // kv_offload = "cgn" (set: on): completions and chat requests reach the engine with
  // kv_transfer_params.cgn_prefix_digests and cgn_resident_digests (these hints), for the
  // engine's kvcached connector.
  KvHintsFn kv_hints;
};

using PrefixRecorder = std::function<void(std::span<const Digest>)>;
using HealthSource = std::function<EngineHealth()>;

class AgentProxy {
 public:
  // recorder may be empty (no state backend publishes prefixes): no digests are computed.
  AgentProxy(AgentProxyOptions options, HealthSource health, PrefixRecorder recorder);
  ~AgentProxy();
  AgentProxy(const AgentProxy&) = delete;
  AgentProxy& operator=(const AgentProxy&) = delete;

  // Binds and starts the workers; returns the bound port.
  http::HttpResult<uint16_t> start();
  // Stops accepting; in-flight requests and streams may finish for `grace`.
  void stop(std::chrono::milliseconds grace);
  uint16_t port() const;

  // The agent's metric registry (the owner may add families and collect callbacks).
  metrics::Registry& registry() { return registry_; }
  // Prefix chains handed to the recorder so far.
  uint64_t chains_recorded() const { return chains_recorded_.load(std::memory_order_relaxed); }

  struct Impl;

 private:
  metrics::Registry registry_;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> chains_recorded_{0};
};

// Whether `req` carries one of the cluster tokens (true when none is configured): the request
// comes from the router, not from a client that reached the agent directly. The data path refuses
// /v1/* without it; later checks (whose kv_transfer_params to trust) can ask the same question.
bool presents_cluster_token(const http::Request& req, const auth::ClusterToken& token);

// --- pure helpers, exposed for tests ---------------------------------------------------------

// Accumulates the assistant reply of a streamed chat completion from its SSE data payloads
// (choices[0].delta.content, delta.tool_calls[i].function.{name,arguments}). Not thread-safe.
class StreamedReply {
 public:
  // One event's data; ignores anything that is not a JSON chunk (e.g. "[DONE]").
  void add_event(std::string_view data);
  const AssistantReply& reply() const { return reply_; }

 private:
  AssistantReply reply_;
};

// Whether a request reached the agent from the Cognitora router, the only sender allowed to set
// `kv_transfer_params` (a client's would point the engine at a host of its choosing and pin KV
// blocks). The router marks its prefill and decode legs with X-CGN-Role: prefill|decode. With a
// cluster token (or mutual TLS) configured, only the router gets this far: the data path refuses
// any request without it first (presents_cluster_token). Without one the marker is all there is,
// and a client that can reach the agent directly can forge it (docs/security.md: close the
// agent's port with [cluster] token_file).
bool request_from_router(const http::Request& req);

// The body without its top-level `kv_transfer_params`: nullopt when it has none (the body is
// forwarded untouched), an error message when it names them but is not a JSON object we can
// rewrite (the request is then refused rather than forwarded).
enum class StripError { kUnreadable };
Result<std::optional<std::string>, StripError> strip_kv_transfer_params(std::string_view body);

// At most this many digests go into each of cgn_prefix_digests and cgn_resident_digests
// (cgn-kvcached's limit for one lookup).
inline constexpr size_t kMaxKvTransferDigests = 16384;

// `body` with kv_transfer_params.cgn_prefix_digests = prefix and cgn_resident_digests = resident
// (64-hex strings, each list cut to kMaxKvTransferDigests), merged into the kv_transfer_params
// the body already has (its other keys kept; a non-object value is replaced). nullopt when the
// body is not a JSON object (it is then forwarded as it is).
std::optional<std::string> add_cgn_kv_transfer_params(std::string_view body, std::span<const Digest> prefix,
                                                      std::span<const Digest> resident);

// The digest chain of a completed request on `path`: chat (with `reply` appended when given)
// or completions; empty for other paths or a body that does not parse.
std::vector<Digest> completion_digests(std::string_view path, std::string_view request_body,
                                       const AssistantReply* reply, uint32_t block_bytes);

}  // namespace cgn::agent
