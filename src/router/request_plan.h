// RequestPlan: the sequence of steps that serves one admitted request. The Dispatcher runs one
// step (ranked attempts, failover, relay or hold); a plan decides which steps run, on which
// targets, and what the client gets between them:
//
//   AggregatedPlan  one relayed step on the nodes RoutingCore ranks for the model (role both).
//   PdPlan          (disagg.h) a buffered prefill step, then a relayed decode step with the
//                   prefill's kv_transfer_params.
//
//   CascadePlan     (cascade_plan.h) buffered gated steps on cheap models, then the last model
//                   relayed (aggregated or P/D) when every gate escalates.
//
// Threads: a plan lives for one request on one server worker.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "router/dispatcher.h"

namespace cgn::router {

class RequestPlan {
 public:
  virtual ~RequestPlan() = default;
  // Serves `ctx` with `d`; every path ends with the client answered and the request recorded.
  virtual boost::asio::awaitable<void> serve(RequestContext& ctx, Dispatcher& d) = 0;
};

// Ranks the nodes for ctx.rr (decode order for a decode leg) and runs `step` on them, relayed:
// 429 when every node is overloaded or the deadline cannot be met, 503 when no node can serve,
// 502/504 when every attempt fails. True when a node's answer reached the client.
boost::asio::awaitable<bool> serve_ranked(RequestContext& ctx, Dispatcher& d, GatewayServices& s,
                                          const Dispatcher::Step& step, bool decode_order);

class AggregatedPlan final : public RequestPlan {
 public:
  explicit AggregatedPlan(GatewayServices& s) : s_(s) {}
  boost::asio::awaitable<void> serve(RequestContext& ctx, Dispatcher& d) override;

 private:
  GatewayServices& s_;
};

}  // namespace cgn::router
