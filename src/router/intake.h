// Request intake: what the router decides about a request from its headers alone, before it reads
// a body or routes anything, and how it reports a refusal.
//
// - check_head() is the API listener's http::HeaderCheck: the API key for every /v1/ path and the
//   metrics key for /metrics run when the headers are complete, so an unauthenticated client never
//   gets "100 Continue" and its body is never buffered.
// - Every refusal (a bad key, a server cap, a field only Cognitora may set) goes through
//   RejectionLog: it counts cgn_router_rejections_total{reason} and logs one line per reason and
//   client address per interval, with how many refusals that line stands for. Never the key, never
//   the prompt.
// - Request ids: a client's X-Request-Id goes back to that client only; the engines get an id the
//   router made, so two tenants sending the same id never meet at a node.
//
// Thread-safety: every method is safe from any thread (the log state has its own mutex).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/http/types.h"
#include "router/api_keys.h"
#include "router/router_metrics.h"

namespace cgn::router {

// Label values of cgn_router_rejections_total.
namespace reject_reason {
inline constexpr std::string_view kAuth = "auth";                     // missing or wrong API key
inline constexpr std::string_view kMetricsAuth = "metrics_auth";      // missing or wrong metrics key
inline constexpr std::string_view kConnections = "connections";       // [router.limits] max_connections
inline constexpr std::string_view kBufferedBytes = "buffered_bytes";  // [router.limits] max_buffered_bytes
inline constexpr std::string_view kKvTransferParams = "kv_transfer_params";  // a client sent them
}  // namespace reject_reason

// Counts refusals and logs them at most once per (reason, client address) per `interval`; the
// next line says how many were suppressed meanwhile. The table is bounded by `max_clients`.
class RejectionLog {
 public:
  RejectionLog(RouterMetrics& metrics, std::chrono::milliseconds interval, size_t max_clients = 4096);

  // `remote` is "ADDR:PORT" or empty (unknown).
  void note(std::string_view reason, std::string_view remote);
  // Lines written so far (tests).
  uint64_t lines() const;

 private:
  struct Client {
    std::chrono::steady_clock::time_point logged;
    uint64_t suppressed = 0;
  };
  RouterMetrics& metrics_;
  const std::chrono::milliseconds interval_;
  const size_t max_clients_;
  mutable std::mutex mu_;
  std::map<std::string, Client, std::less<>> clients_;
  uint64_t lines_ = 0;
};

struct RequestIds {
  std::string client;    // echoed to the client: its own X-Request-Id when valid, else `upstream`
  std::string upstream;  // sent to nodes: always one the router made ("cgn-" + 32 hex digits)
};
RequestIds request_ids(const http::Request& req);

// The keys intake checks; both optional.
struct IntakeKeys {
  const ApiKeys* api = nullptr;      // for every /v1/ path; null or none configured: open
  const ApiKeys* metrics = nullptr;  // for /metrics; null or none configured: open
};

// http::HeaderCheck for the API listener (and, with only the metrics key, for a metrics listener).
std::optional<http::Response> check_head(const IntakeKeys& keys, RejectionLog& log, const http::Request& head,
                                         std::string_view remote);

// The 401 for a missing or wrong API key, with the client's request id.
http::Response unauthorized_response(const http::Request& head);

}  // namespace cgn::router
