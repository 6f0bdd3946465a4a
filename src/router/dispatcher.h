// Dispatcher: runs ONE step of a request on a ranked list of targets. For each target in turn:
// the in-flight ticket (NodeTable), the upstream request (the client's allow-listed headers,
// core/http/proxy_headers.h), the attempt, and failover to the next target on connect error,
// timeout, 429/5xx or an upstream that dies before its first body byte, within the request's
// RetryBudget. Once a byte has reached the client it never fails over.
//
// A step is either
//   - relayed: the answer goes to the client (SSE events flushed one by one, raw pieces, or the
//     buffered body) with X-CGN-Node and X-Request-Id, and the request is recorded; or
//   - buffered: the whole answer is held for the caller (a RequestPlan, request_plan.h), which
//     decides what comes next (the prefill leg of P/D, the first step of a cascade).
// When the client leaves, the pending upstream call is cancelled by the server, the ticket is
// closed and the request is recorded as 499.
//
// A target may be a node of the table or a federation peer (Target::peer(): no routing-core
// bookkeeping, no passive health).
//
// Threads: a Dispatcher lives for one request on one server worker and uses that worker's
// HttpClient; NodeTable, RouterMetrics and Admission are shared and thread-safe.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster_token.h"
#include "core/config.h"
#include "core/http/client.h"
#include "core/http/server.h"
#include "core/openai_error.h"
#include "router/admission.h"
#include "router/node_table.h"
#include "router/retry_budget.h"
#include "router/router_metrics.h"

namespace cgn::router::carbon {
class Gate;
}

namespace cgn::router {

inline constexpr unsigned kClientClosed = 499;  // nginx's code for "client went away first"

class ResponseAffinity;  // responses.h

// What every part of the request path shares (owned by the Gateway).
struct GatewayServices {
  NodeTable& nodes;
  RouterMetrics& metrics;
  Admission& admission;
  const config::RouterConfig& rc;
  const auth::ClusterToken& cluster_token;
  size_t max_attempts = 3;
  ResponseAffinity* responses = nullptr;  // /v1/responses: response id -> node; null: not learned
  const carbon::Gate* carbon = nullptr;   // [router.carbon]; null: provider = "off"
};

// One admitted request, as every step sees it (request_intake.h builds it).
struct RequestContext {
  http::Exchange& ex;
  const http::Request& req;
  std::string request_id;     // echoed to the client
  std::string upstream_id;    // sent to nodes
  std::string remote;         // the client's address (X-Forwarded-For)
  std::string model;          // the model label (served by some node)
  std::string_view endpoint;  // the endpoint label (chat, completions, embeddings)
  std::chrono::steady_clock::time_point start;
  std::string priority;  // X-CGN-Priority, or empty
  int64_t deadline_ms = 0;
  bool stream = false;  // the client asked for a stream
  // The routing signal (owned here; route() hands RoutingCore views of it).
  std::vector<Digest> digests;
  uint64_t prompt_tokens = 0;
  std::string session_key;
  routing::RoleWanted role = routing::RoleWanted::kAny;  // the current step's
  RetryBudget retries;                                   // across every step of the request
  // Added to every answer the client gets (relayed, refused or failed), e.g. a cascade's
  // X-CGN-Cascade-Step.
  std::vector<std::pair<std::string, std::string>> answer_headers;
  // A plan's rewrite of the client's body that every step starts from (a cascade sets each
  // step's model); null: the client's body.
  const std::string* body_override = nullptr;

  std::string_view client_body() const {
    return body_override != nullptr ? std::string_view(*body_override) : std::string_view(req.body());
  }

  routing::RouteRequest route() const {
    routing::RouteRequest rr;
    rr.model = model;
    rr.role = role;
    rr.digests = digests;
    rr.prompt_tokens = prompt_tokens;
    rr.session_key = session_key;
    rr.deadline = deadline_ms * kNanosPerMilli;
    return rr;
  }
};

double seconds_since(std::chrono::steady_clock::time_point t);

// The request a target gets for a step: the allow-listed client headers, the client's address as
// X-Forwarded-For, the router's own request id, no query string; `role` is X-CGN-Role and `body`
// replaces the client's body when set. The cluster token goes to agent nodes only.
http::Request upstream_request(const RequestContext& ctx, const Target& t, std::string_view role,
                               const std::string* body, const auth::ClusterToken& token);

// Answers the client with `e` (and the request id) and records the request.
boost::asio::awaitable<void> answer_error(RequestContext& ctx, RouterMetrics& metrics, const ApiError& e,
                                          uint32_t retry_after_s = 0);

class Dispatcher {
 public:
  Dispatcher(GatewayServices& s, http::HttpClient& client) : s_(s), client_(client) {}

  struct Step {
    std::string_view role = "both";     // X-CGN-Role
    const std::string* body = nullptr;  // null: the client's body
    bool buffered = false;              // hold the answer (true) or relay it (false)
    // Relay only: the prefill node that handed this request over (X-CGN-Prefill-Node and the
    // handoff metric); empty when none did.
    std::string prefill_node;
    std::chrono::steady_clock::time_point handed_over{};
    // > 0: caps each attempt's first-byte and whole-answer timeouts (a cascade's gated step
    // within the client's deadline).
    std::chrono::milliseconds budget{0};
  };

  struct Outcome {
    enum class Kind {
      kDone,        // the client has its answer (relayed) and the request is recorded
      kHeld,        // buffered: `answer` from `node` (not a 429/5xx)
      kFailed,      // every attempt failed before anything reached the client
      kClientLeft,  // the client went away; the request is recorded as 499
    };
    Kind kind = Kind::kFailed;
    std::optional<http::Response> answer;  // kHeld: the answer; kFailed: the last 429/5xx, if any
    std::string node;                      // the target `answer` came from
    http::HttpError last_error = http::HttpError::connect_failed;
    std::string last_error_text;
    bool gave_up = false;  // the retry budget ended the request
    size_t tried = 0;
  };

  boost::asio::awaitable<Outcome> run(RequestContext& ctx, const Step& step,
                                      const std::vector<Target>& targets);

  // Answers a kFailed outcome: the last upstream answer, or 502/504 naming the last error.
  boost::asio::awaitable<void> answer_failure(RequestContext& ctx, Outcome& out);

 private:
  enum class Next { kRetry, kDone, kHeld, kClientLeft };
  boost::asio::awaitable<Next> attempt_buffered(RequestContext& ctx, const Step& step, const Target& t,
                                                bool more, Outcome& out);
  boost::asio::awaitable<Next> attempt_relayed(RequestContext& ctx, const Step& step, const Target& t,
                                               bool more, Outcome& out);
  // Relay an answer; kRetry: its body failed (`err`) before the first byte reached the client.
  boost::asio::awaitable<Next> relay_buffered(RequestContext& ctx, const Target& t,
                                              http::ClientStream& stream, routing::DispatchTicket& ticket,
                                              http::Fields headers, Error<http::HttpError>& err);
  boost::asio::awaitable<Next> relay_raw(RequestContext& ctx, http::ClientStream& stream,
                                         routing::DispatchTicket& ticket, http::Fields headers,
                                         Error<http::HttpError>& err);
  boost::asio::awaitable<Next> relay_sse(RequestContext& ctx, const Target& t, http::ClientStream& stream,
                                         routing::DispatchTicket& ticket, http::Fields headers,
                                         Error<http::HttpError>& err);
  // Notes an attempt's failure: the budget may end the request; else a retry is counted.
  void note_failure(RequestContext& ctx, const Target& t, AttemptFailure f, bool more, Outcome& out);
  // A transport error: remembered, and a node that refused the connection leaves routing.
  void note_error(RequestContext& ctx, const Target& t, const Error<http::HttpError>& err, bool more,
                  Outcome& out);
  http::ClientTimeouts timeouts(const Target& t) const;
  // What one attempt sends: where, the request (upstream_request) and its timeouts. Named before
  // the co_await that takes them: GCC 12 mis-handles temporaries there.
  struct UpstreamCall {
    http::Upstream up;
    http::Request req;
    http::ClientTimeouts to;
  };
  UpstreamCall upstream_call(const RequestContext& ctx, const Step& step, const Target& t) const;

  GatewayServices& s_;
  http::HttpClient& client_;
};

}  // namespace cgn::router
