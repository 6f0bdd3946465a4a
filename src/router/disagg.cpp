#include "router/disagg.h"

#include <algorithm>

#include "core/http/client.h"
#include "core/log.h"
#include "router/gateway.h"

// GCC 12 at -O1 with sanitizers reports -Wmismatched-new-delete on Asio coroutine frames: a
// false positive, as in src/sim/server.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace cgn::router {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

constexpr unsigned kClientClosed = 499;

log::Logger logger() {
  static log::Logger l = log::get("router");
  return l;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

namespace disagg {

Result<std::string, DisaggError> prefill_body(std::string_view client_body) {
  json j = json::parse(client_body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(DisaggError::kNotAnObject, "the request body is not a JSON object");
  }
  j["max_tokens"] = 1;
  if (j.contains("max_completion_tokens")) {
    j["max_completion_tokens"] = 1;
  }
  j["stream"] = false;
  for (const char* key : {"stream_options", "min_tokens", "min_completion_tokens"}) {
    j.erase(key);
  }
  j["kv_transfer_params"] = {{"do_remote_decode", true},    {"do_remote_prefill", false},
                             {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                             {"remote_host", nullptr},      {"remote_port", nullptr}};
  return j.dump();
}

std::optional<json> handoff_params(std::string_view prefill_answer) {
  const json j = json::parse(prefill_answer, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return std::nullopt;
  }
  auto it = j.find("kv_transfer_params");
  if (it == j.end() || !it->is_object() || it->empty()) {
    return std::nullopt;
  }
  return *it;
}

std::string decode_body(std::string_view client_body, const json& params) {
  json j = json::parse(client_body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return std::string(client_body);
  }
  j["kv_transfer_params"] = params;
  return j.dump();
}

void order_for_decode(std::vector<routing::Candidate>& ranked) {
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const routing::Candidate& a, const routing::Candidate& b) {
                     if (a.load != b.load) {
                       return a.load < b.load;
                     }
                     return a.overlap_blocks > b.overlap_blocks;
                   });
}

}  // namespace disagg

PdRouter::Mode PdRouter::mode(std::string_view model) const {
  std::lock_guard lock(g_.core_mu_);
  for (const auto& [name, info] : g_.nodes_) {
    const auto* st = g_.core_.node(info.index);
    if (st != nullptr && st->role != routing::NodeRole::kBoth && st->serves(model)) {
      return Mode::kDisaggregated;
    }
  }
  return Mode::kAggregated;
}

asio::awaitable<void> PdRouter::fail(http::Exchange& ex, const ApiError& e, const std::string& request_id,
                                     std::string_view model, std::string_view endpoint,
                                     std::chrono::steady_clock::time_point start, uint32_t retry_after_s) {
  http::Response res = http::make_error_response(e);
  res.set("X-Request-Id", request_id);
  if (retry_after_s > 0) {
    res.set(http::Field::retry_after, std::to_string(retry_after_s));
  }
  (void)co_await ex.respond(std::move(res));
  g_.metrics_.request_done(model, endpoint, static_cast<unsigned>(e.status), seconds_since(start));
}

asio::awaitable<PdRouter::Leg> PdRouter::prefill(http::Exchange& ex, const http::Request& req,
                                                 routing::RouteRequest rr, const std::string& request_id,
                                                 std::string_view ep_label,
                                                 std::chrono::steady_clock::time_point start,
                                                 const MakeRequest& make) {
  Leg leg;
  const auto& rc = g_.options_.router;
  const std::string model(rr.model);
  const bool fallback_ok = rc.disaggregation.fallback == "aggregated";

  // Objects passed to a co_await are named first: GCC 12 mis-handles temporaries there.
  auto body = disagg::prefill_body(req.body());
  if (!body) {
    const ApiError e = bad_request("The request body must be a JSON object.");
    co_await fail(ex, e, request_id, model, ep_label, start);
    leg.done = true;
    co_return leg;
  }

  // The prefill node with the best overlap (the kv score over prefill-capable nodes).
  rr.role = routing::RoleWanted::kPrefill;
  std::vector<Target> targets;
  std::string why;
  {
    std::lock_guard lock(g_.core_mu_);
    auto decided = g_.core_.decide(rr);
    if (!decided.ok()) {
      why = std::string(routing::to_string(decided.error().code));
    } else {
      for (const auto& c : decided->ranked) {
        if (targets.size() >= g_.options_.max_attempts) {
          break;
        }
        const auto* st = g_.core_.node(c.node);
        if (st == nullptr) {
          continue;
        }
        auto it = g_.nodes_.find(st->id);
        if (it != g_.nodes_.end()) {
          targets.push_back(Target{it->first, it->second.endpoint, c.node});
        }
      }
    }
  }
  if (targets.empty()) {
    g_.metrics_.pd_leg(model, "prefill", "no_node");
    if (fallback_ok) {
      CGN_LOG_DEBUG(logger(), "no prefill node; serving aggregated", log::kv("request_id", request_id),
                    log::kv("model", model), log::kv("why", why));
      g_.metrics_.pd_leg(model, "decode", "fallback");
      co_return leg;
    }
    const ApiError e = service_unavailable("No prefill node can serve model '" + model + "' now (" + why +
                                               ") and [router.disaggregation] fallback is \"reject\".",
                                           "no_prefill_node");
    co_await fail(ex, e, request_id, model, ep_label, start);
    leg.done = true;
    co_return leg;
  }

  Admission::Slot slot = g_.admission_.try_acquire(model, "prefill");
  if (!slot.held()) {
    g_.metrics_.admission_rejected(model, "queue_full");
    const ApiError e = too_many_requests(
        "Too many prefill requests in flight for model '" + model + "'; retry later.", "queue_full");
    co_await fail(ex, e, request_id, model, ep_label, start,
                  std::max<uint32_t>(1, g_.admission_.retry_after_s()));
    leg.done = true;
    co_return leg;
  }

  http::HttpClient& client = *g_.clients_[ex.worker_index()];
  http::ClientTimeouts timeouts;
  timeouts.connect = std::chrono::milliseconds(rc.timeouts.connect_ms);
  timeouts.header = std::chrono::milliseconds(rc.timeouts.first_token_ms);
  timeouts.idle = std::chrono::milliseconds(rc.timeouts.idle_ms);
  timeouts.body = std::chrono::milliseconds(rc.timeouts.request_ms);

  std::optional<http::Response> last_answer;
  std::string last_answer_node;
  std::string last_error;
  bool last_timeout = false;
  bool gave_up = false;  // a second node closed on this request: no further node, no fallback
  // The client left during the prefill leg: the server cancelled the pending send (the
  // connection to the prefill node closes, so the node aborts the request), or it left before an
  // attempt began. Either way no decode leg follows.
  auto client_left = [&] {
    g_.metrics_.pd_leg(model, "prefill", "cancelled");
    g_.metrics_.request_done(model, ep_label, kClientClosed, seconds_since(start));
    CGN_LOG_DEBUG(logger(), "client left during the prefill leg", log::kv("request_id", request_id));
    leg.done = true;
  };
  for (size_t i = 0; i < targets.size() && !gave_up; ++i) {
    const Target& t = targets[i];
    const bool more = i + 1 < targets.size();
    if (!ex.client_open()) {
      // A cancellation emitted between two awaits is not seen by the next send: check first.
      client_left();
      co_return leg;
    }
    routing::DispatchTicket ticket;
    {
      std::lock_guard lock(g_.core_mu_);
      ticket = g_.core_.record_dispatch(t.index, rr);
    }
    const http::Upstream up{t.endpoint.host, t.endpoint.port, t.endpoint.tls};
    http::Request leg_req = make(t, *body, "prefill");
    const http::ClientTimeouts attempt_timeouts = with_continue(timeouts, t.endpoint, rc);
    auto res = co_await client.send(up, std::move(leg_req), attempt_timeouts);
    {
      std::lock_guard lock(g_.core_mu_);
      if (res.ok()) {
        g_.core_.record_first_token(ticket);
      }
      g_.core_.record_completion(ticket);
    }
    if (!ex.client_open()) {
      client_left();
      co_return leg;
    }
    if (!res) {
      const auto code = res.error().code;
      last_error = t.node + ": " + res.error().message;
      last_timeout = code == http::HttpError::timeout;
      if (code == http::HttpError::connect_failed) {
        g_.mark_refused(t.node);  // passive health, as for any attempt
      }
      const AttemptFailure f = failure_of(code);
      gave_up = !leg.retries.allows_retry_after(f);
      if (more && !gave_up) {
        g_.metrics_.retry(model, reason_label(f));
      }
      CGN_LOG_DEBUG(logger(), "prefill leg failed", log::kv("request_id", request_id),
                    log::kv("node", t.node), log::kv("error", res.error().message));
      continue;
    }
    const unsigned status = res->result_int();
    if (status == 429 || status >= 500) {
      const AttemptFailure f = failure_of_answer(status, *res);
      gave_up = !leg.retries.allows_retry_after(f);
      last_answer_node = t.node;
      last_answer = std::move(*res);
      if (more && !gave_up) {
        g_.metrics_.retry(model, reason_label(f));
      }
      continue;
    }
    if (status != 200) {
      // The node refused the request itself (4xx): a decode node would too. Relay its answer.
      http::Response out =
          http::make_response(status, res->body(), std::string((*res)[http::Field::content_type]));
      out.set("X-CGN-Node", t.node);
      out.set("X-Request-Id", request_id);
      (void)co_await ex.respond(std::move(out));
      g_.metrics_.pd_leg(model, "prefill", "refused");
      g_.metrics_.request_done(model, ep_label, status, seconds_since(start));
      leg.done = true;
      co_return leg;
    }
    leg.prefill_node = t.node;
    leg.answered = std::chrono::steady_clock::now();
    if (auto params = disagg::handoff_params(res->body())) {
      leg.decode_body = disagg::decode_body(req.body(), *params);
      g_.metrics_.pd_leg(model, "prefill", "handoff");
      g_.metrics_.pd_leg(model, "decode", "pull");
    } else {
      // A stop token came first (or the node kept no blocks): decode computes the prompt itself.
      g_.metrics_.pd_leg(model, "prefill", "no_params");
      g_.metrics_.pd_leg(model, "decode", "recompute");
    }
    co_return leg;
  }

  // Every prefill attempt failed before answering.
  g_.metrics_.pd_leg(model, "prefill", "failed");
  if (gave_up) {
    CGN_LOG_WARN(logger(),
                 "a second node closed the connection on this request before answering; not retried",
                 log::kv("request_id", request_id), log::kv("model", model));
  } else if (fallback_ok) {
    CGN_LOG_WARN(logger(), "every prefill attempt failed; decode recomputes",
                 log::kv("request_id", request_id), log::kv("model", model));
    g_.metrics_.pd_leg(model, "decode", "fallback");
    co_return leg;
  }
  leg.done = true;
  if (last_answer.has_value()) {
    const unsigned status = last_answer->result_int();
    http::Response out = http::make_response(status, last_answer->body(),
                                             std::string((*last_answer)[http::Field::content_type]));
    out.set("X-CGN-Node", last_answer_node);
    out.set("X-Request-Id", request_id);
    (void)co_await ex.respond(std::move(out));
    g_.metrics_.request_done(model, ep_label, status, seconds_since(start));
    co_return leg;
  }
  const std::string what = "All " + std::to_string(targets.size()) + " prefill attempts for model '" + model +
                           "' failed; last: " + last_error;
  const ApiError e = last_timeout ? gateway_timeout(what) : bad_gateway(what);
  co_await fail(ex, e, request_id, model, ep_label, start);
  co_return leg;
}

}  // namespace cgn::router
