// The router's admin endpoints, for operators (cgn-ctl) and never for users:
//
//   POST /admin/v1/routes/explain[?endpoint=chat|completions|embeddings|responses]
//        body: an OpenAI request, exactly as a client would send it (a Responses body with
//        endpoint=responses: parsed as the chat request it stands for, as the gateway does; a
//        follow-up whose previous_response_id the router knows is explained as pinned to that node).
//        The router's own intake (parse, digests) and RoutingCore::explain (a dry run of the
//        decision: the RNG and round-robin counter are put back) answer, as JSON: the policy,
//        the digests, every node's overlap by tier, score terms and guard verdict, and the node
//        the next identical request would go to. Nothing is dispatched or recorded.
//
// Every admin path needs `Authorization: Bearer <[router.admin] key>`; the users' API keys do not
// open it. Without an admin key configured the endpoints answer 403 (closed by default).
//
// Threads: handlers run on server workers; NodeTable is thread-safe.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "core/http/server.h"
#include "router/api_keys.h"
#include "router/dispatcher.h"
#include "router/intake.h"

namespace cgn::router {

inline constexpr std::string_view kAdminPrefix = "/admin/v1/";

class AdminApi {
 public:
  AdminApi(GatewayServices& services, RejectionLog& rejections);
  // The [router.admin] key (none: closed). Before the server starts.
  void set_key(ApiKeys admin_key) { key_ = std::move(admin_key); }

  // Registers the admin routes on `rt`.
  void add_routes(http::RouteTable& rt);

  // The explanation of `rr` against the table as it stands (no side effect on later decisions).
  static nlohmann::json explain(NodeTable& nodes, const routing::RouteRequest& rr);

 private:
  boost::asio::awaitable<void> explain_route(http::Exchange& ex);
  // Answers 401/403 and returns false unless the request carries the admin key.
  boost::asio::awaitable<bool> authorized(http::Exchange& ex);

  GatewayServices& s_;
  RejectionLog& rejections_;
  ApiKeys key_;
};

}  // namespace cgn::router
