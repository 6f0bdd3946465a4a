#include "router/gateway.h"

#include <simdjson.h>

#include <algorithm>
#include <boost/asio/this_coro.hpp>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "core/canonical.h"
#include "core/digest.h"
#include "core/host_port.h"
#include "core/http/proxy_headers.h"
#include "core/log.h"
#include "core/tls/grpc_tls.h"
#include "router/disagg.h"
#include "router/intake.h"
#include "router/policy_config.h"
#include "router/retry_budget.h"
#include "state/static/static_store.h"

// GCC 12 at -O1 with sanitizers reports -Wmismatched-new-delete on Asio coroutine frames (it
// sees awaitable_frame_base's operator delete but not the recycling allocator's operator new):
// a false positive, as in src/sim/server.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace cgn::router {

namespace asio = boost::asio;
using http::Exchange;
using http::HttpError;
using http::HttpResult;

namespace {

constexpr std::string_view kUnknownModel = "_unknown";
constexpr std::string_view kRole = "both";  // aggregated: the request wants a whole node
constexpr unsigned kClientClosed = 499;     // nginx's code for "client went away first"

log::Logger logger() {
  static log::Logger l = log::get("router");
  return l;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

bool iequals_prefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) {
    return false;
  }
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
    if (c != prefix[i]) {
      return false;
    }
  }
  return true;
}

struct Usage {
  double prompt = 0;
  double completion = 0;
  bool found = false;
};

// `usage` of an OpenAI response or final stream chunk; cheap when the text has none. simdjson
// (one reused parser per thread) rather than nlohmann: every buffered answer passes through here.
Usage parse_usage(std::string_view body) {
  Usage u;
  if (body.find("\"usage\"") == std::string_view::npos) {
    return u;
  }
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object root;
  if (parser.parse(body.data(), body.size()).get(root) != simdjson::SUCCESS) {
    return u;
  }
  simdjson::dom::object usage;
  if (root["usage"].get(usage) != simdjson::SUCCESS) {
    return u;
  }
  // get_double() also converts integers; a string or other type is not a count.
  if (usage["prompt_tokens"].get_double().get(u.prompt) == simdjson::SUCCESS) {
    u.found = true;
  } else {
    u.prompt = 0;
  }
  if (usage["completion_tokens"].get_double().get(u.completion) == simdjson::SUCCESS) {
    u.found = true;
  } else {
    u.completion = 0;
  }
  return u;
}

std::string_view endpoint_label(Endpoint e) {
  switch (e) {
    case Endpoint::kChat:
      return "chat";
    case Endpoint::kCompletions:
      return "completions";
    case Endpoint::kEmbeddings:
      return "embeddings";
  }
  return "other";
}

constexpr std::string_view kDashboardFiles[] = {"index.html", "dashboard.css", "dashboard.js", "prom.js",
                                                "metric_names.txt"};

std::string_view content_type_of(std::string_view path) {
  if (path.ends_with(".html")) {
    return "text/html; charset=utf-8";
  }
  if (path.ends_with(".css")) {
    return "text/css; charset=utf-8";
  }
  if (path.ends_with(".js") || path.ends_with(".mjs")) {
    return "text/javascript; charset=utf-8";
  }
  if (path.ends_with(".svg")) {
    return "image/svg+xml";
  }
  if (path.ends_with(".json")) {
    return "application/json";
  }
  return "text/plain; charset=utf-8";
}

}  // namespace

// An agent answers "100 Continue" as soon as it has the headers: one that does not within
// continue_ms is dead or hung, and the request (its body never sent) goes to the next node.
http::ClientTimeouts with_continue(http::ClientTimeouts t, const cluster::NodeEndpoint& endpoint,
                                   const config::RouterConfig& rc) {
  if (endpoint.agent) {
    t.continue_wait = std::chrono::milliseconds(rc.timeouts.continue_ms);
  }
  return t;
}

Result<std::pair<std::string, uint16_t>, GatewayError> parse_listen(std::string_view listen) {
  if (auto hp = split_host_port(listen)) {
    return std::move(*hp);
  }
  return make_error(GatewayError::kConfig, "listen address \"" + std::string(listen) + "\" is not HOST:PORT");
}

// ---------------------------------------------------------------------------------------------
// Handlers: the coroutines behind each route. Kept in a class of their own so gateway.h stays
// free of the request-flow details.
class Gateway::Handlers {
 public:
  explicit Handlers(Gateway& g) : g_(g) {}

  http::RouteTable routes();

 private:
  struct Upstream {
    std::string node;
    cluster::NodeEndpoint endpoint;
    routing::NodeIndex index = routing::kNoNode;
  };

  // Sends an error, with the request id, and records it.
  asio::awaitable<void> fail(Exchange& ex, const ApiError& e, const std::string& request_id,
                             std::string_view model_label, std::string_view endpoint,
                             std::chrono::steady_clock::time_point start, uint32_t retry_after_s = 0) {
    http::Response res = http::make_error_response(e);
    res.set("X-Request-Id", request_id);
    if (retry_after_s > 0) {
      res.set(http::Field::retry_after, std::to_string(retry_after_s));
    }
    (void)co_await ex.respond(std::move(res));
    if (!endpoint.empty()) {
      g_.metrics_.request_done(model_label, endpoint, static_cast<unsigned>(e.status), seconds_since(start));
    }
  }

  asio::awaitable<void> inference(Exchange& ex, Endpoint endpoint);
  asio::awaitable<void> models(Exchange& ex);
  asio::awaitable<void> health(Exchange& ex);
  asio::awaitable<void> dashboard(Exchange& ex);

  bool model_known(std::string_view model) const {
    std::lock_guard lock(g_.core_mu_);
    for (const auto& [name, info] : g_.nodes_) {
      const auto* st = g_.core_.node(info.index);
      if (st != nullptr && st->serves(model)) {
        return true;
      }
    }
    return false;
  }

  // The request a node gets: the allow-listed client headers (core/http/proxy_headers.h), the
  // client's address as X-Forwarded-For, the router's own request id, no query string. `role` is
  // the leg (X-CGN-Role); `body` replaces the client's body when set (P/D legs).
  http::Request upstream_request(const http::Request& in, std::string_view remote,
                                 const cluster::NodeEndpoint& endpoint, const std::string& upstream_id,
                                 std::string_view priority, int64_t deadline_ms,
                                 std::string_view role = kRole, const std::string* body = nullptr) const {
    http::Request out{http::Verb::post, endpoint.base_path + std::string(http::path_of(in.target())), 11};
    http::copy_client_headers(in, out);
    http::set_forwarded_for(out, remote);
    out.set("X-Request-Id", upstream_id);
    out.set("X-CGN-Request-Id", upstream_id);
    out.set("X-CGN-Role", role);
    if (!priority.empty()) {
      out.set("X-CGN-Priority", priority);
    }
    if (endpoint.agent && g_.options_.cluster_token.configured()) {
      out.set(auth::kClusterTokenHeader, g_.options_.cluster_token.presented());
    }
    if (deadline_ms > 0) {
      out.set("X-CGN-Deadline-Ms", std::to_string(deadline_ms));
    }
    out.body() = body != nullptr ? *body : in.body();
    out.prepare_payload();
    return out;
  }

  static http::Fields response_headers(const http::Fields& upstream, const std::string& node,
                                       const std::string& request_id) {
    http::Fields h;
    http::copy_response_headers(upstream, h, /*drop_cognitora=*/true);
    h.set("X-CGN-Node", node);
    h.set("X-Request-Id", request_id);
    return h;
  }

  Gateway& g_;
};

http::RouteTable Gateway::Handlers::routes() {
  http::RouteTable rt;
  rt.post("/v1/chat/completions", [this](Exchange& ex) { return inference(ex, Endpoint::kChat); });
  rt.post("/v1/completions", [this](Exchange& ex) { return inference(ex, Endpoint::kCompletions); });
  rt.post("/v1/embeddings", [this](Exchange& ex) { return inference(ex, Endpoint::kEmbeddings); });
  rt.get("/v1/models", [this](Exchange& ex) { return models(ex); });
  rt.get("/health", [this](Exchange& ex) { return health(ex); });
  if (g_.options_.router.metrics.listen.empty()) {
    rt.get("/metrics", http::metrics_handler([this] { return g_.metrics_.render(); }));
    rt.enable_cors("/metrics");
  }
  rt.set_fallback([this](Exchange& ex) { return dashboard(ex); });
  return rt;
}

asio::awaitable<void> Gateway::Handlers::health(Exchange& ex) {
  const size_t healthy = g_.healthy_nodes();
  const size_t known = g_.known_nodes();
  nlohmann::json j = {{"status", healthy > 0 ? "ok" : "degraded"},
                      {"nodes", known},
                      {"nodes_healthy", healthy},
                      {"nodes_stale", g_.stale_nodes()}};
  (void)co_await ex.respond(http::make_response(200, j.dump()));
}

asio::awaitable<void> Gateway::Handlers::models(Exchange& ex) {
  const std::string request_id = request_ids(ex.request()).client;
  std::set<std::string> ids;
  {
    std::lock_guard lock(g_.core_mu_);
    for (const auto& [name, info] : g_.nodes_) {
      const auto* st = g_.core_.node(info.index);
      if (st != nullptr && st->health == routing::Health::kHealthy && !st->cordoned) {
        ids.insert(st->models.begin(), st->models.end());
      }
    }
  }
  nlohmann::json data = nlohmann::json::array();
  for (const auto& id : ids) {
    data.push_back({{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "cognitora"}});
  }
  http::Response res = http::make_response(200, nlohmann::json{{"object", "list"}, {"data", data}}.dump());
  res.set("X-Request-Id", request_id);
  (void)co_await ex.respond(std::move(res));
}

asio::awaitable<void> Gateway::Handlers::dashboard(Exchange& ex) {
  std::string_view path = http::path_of(ex.request().target());
  const std::string& dir = g_.options_.dashboard_dir;
  if (dir.empty() || ex.request().method() != http::Verb::get ||
      !(path == "/" || path == "/dashboard" || path.starts_with("/dashboard/"))) {
    (void)co_await ex.respond(http::make_error_response(not_found(
        "No route for " + std::string(ex.request().method_string()) + " " + std::string(path) + ".")));
    co_return;
  }
  if (path == "/" || path == "/dashboard") {
    http::Response res = http::make_response(308, "", "text/plain");
    res.set(http::Field::location, "/dashboard/");
    (void)co_await ex.respond(std::move(res));
    co_return;
  }
  std::string_view file = path.substr(std::string_view("/dashboard/").size());
  if (file.empty()) {
    file = "index.html";
  }
  // Only the dashboard's own files (the ones `cmake --install` ships), whatever else the folder
  // holds (mock_metrics.py, an editor's backup): no traversal, nothing unlisted.
  const bool listed =
      std::find(std::begin(kDashboardFiles), std::end(kDashboardFiles), file) != std::end(kDashboardFiles);
  std::string body;
  if (listed) {
    std::ifstream in(dir + "/" + std::string(file), std::ios::binary);
    if (in) {
      body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      http::Response res = http::make_response(200, std::move(body), content_type_of(file));
      res.set(http::Field::cache_control, "no-cache");
      (void)co_await ex.respond(std::move(res));
      co_return;
    }
  }
  (void)co_await ex.respond(
      http::make_error_response(not_found("No dashboard file '" + std::string(file) + "'.")));
}

asio::awaitable<void> Gateway::Handlers::inference(Exchange& ex, Endpoint endpoint) {
  const auto start = std::chrono::steady_clock::now();
  const http::Request& req = ex.request();
  // The API key was checked with the headers (intake.h), before the body was read.
  const RequestIds ids = request_ids(req);
  const std::string& request_id = ids.client;
  const std::string remote = ex.remote_address();
  const std::string_view ep_label = endpoint_label(endpoint);
  const auto& rc = g_.options_.router;

  // Client routing headers: only Priority and Deadline-Ms are accepted from outside.
  std::string priority;
  if (auto it = req.find("X-CGN-Priority"); it != req.end()) {
    priority = std::string(it->value());
    if (priority != "low" && priority != "normal" && priority != "high") {
      co_await fail(ex, bad_request("'X-CGN-Priority' must be low, normal or high.", "X-CGN-Priority"),
                    request_id, kUnknownModel, ep_label, start);
      co_return;
    }
  }
  int64_t deadline_ms = 0;
  if (auto it = req.find("X-CGN-Deadline-Ms"); it != req.end()) {
    std::string_view v = it->value();
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), deadline_ms);
    if (ec != std::errc{} || p != v.data() + v.size() || deadline_ms <= 0 || deadline_ms > 86'400'000) {
      co_await fail(ex,
                    bad_request("'X-CGN-Deadline-Ms' must be a whole number of milliseconds in 1..86400000.",
                                "X-CGN-Deadline-Ms"),
                    request_id, kUnknownModel, ep_label, start);
      co_return;
    }
  }

  RequestLimits limits;
  limits.max_body_bytes = rc.limits.max_body_bytes;
  limits.max_json_depth = rc.limits.max_json_depth;
  limits.max_messages = rc.limits.max_messages;
  auto parsed = parse_openai_request(endpoint, req.body(), limits);
  if (!parsed) {
    co_await fail(ex, to_api_error(parsed.error()), request_id, kUnknownModel, ep_label, start);
    co_return;
  }
  const ParsedRequest& pr = *parsed;
  if (pr.has_kv_transfer_params) {
    // Only the router sets them, between a prefill and a decode leg: from a client they would
    // point an engine at a host of the client's choosing and pin KV blocks there.
    g_.rejections_.note(reject_reason::kKvTransferParams, remote);
    co_await fail(
        ex,
        bad_request("'kv_transfer_params' is set by the router between prefill and decode; a client "
                    "may not send it.",
                    "kv_transfer_params"),
        request_id, kUnknownModel, ep_label, start);
    co_return;
  }
  if (!model_known(pr.model)) {
    co_await fail(
        ex,
        not_found("The model '" + pr.model.substr(0, 256) + "' does not exist or no node serves it.", "model",
                  "model_not_found"),
        request_id, kUnknownModel, ep_label, start);
    co_return;
  }
  const std::string& model = pr.model;  // a label value now: some node serves it

  // Prefix digests: the routing signal.
  std::vector<Digest> digests;
  const Digest seed = make_digest_seed(digest_seed_fields(pr));
  compute_prefix_digests(seed, pr.canonical_prompt, rc.routing.block_bytes, digests, 8192);

  // Disaggregated prefill/decode (disagg.h): this slot is the decode leg's; the prefill leg
  // takes its own (model, prefill) slot.
  PdRouter pd(g_);
  const bool disaggregated = pd.mode(model) == PdRouter::Mode::kDisaggregated;
  Admission::Slot slot = g_.admission_.try_acquire(model, disaggregated ? "decode" : kRole);
  if (!slot.held()) {
    g_.metrics_.admission_rejected(model, "queue_full");
    co_await fail(ex,
                  too_many_requests("Too many requests in flight for model '" + model + "'; retry later.",
                                    "queue_full"),
                  request_id, model, ep_label, start, std::max<uint32_t>(1, g_.admission_.retry_after_s()));
    co_return;
  }

  std::string session_key = pr.session_key;
  if (session_key.empty()) {
    if (auto it = req.find("X-Session-Id"); it != req.end()) {
      session_key = std::string(it->value().substr(0, 256));
    }
  }
  routing::RouteRequest rr;
  rr.model = model;
  rr.role = routing::RoleWanted::kAny;
  rr.digests = std::move(digests);
  rr.prompt_tokens = static_cast<uint64_t>(static_cast<double>(pr.canonical_prompt.size()) / 4.0);
  rr.session_key = std::move(session_key);
  rr.deadline = deadline_ms * kNanosPerMilli;

  PdRouter::Leg pd_leg;
  if (disaggregated) {
    // A named function object: GCC 12 mis-handles temporaries in a co_await's arguments.
    const PdRouter::MakeRequest make = [&](const PdRouter::Target& t, const std::string& body,
                                           std::string_view role) {
      return upstream_request(req, remote, t.endpoint, ids.upstream, priority, deadline_ms, role, &body);
    };
    pd_leg = co_await pd.prefill(ex, req, rr, request_id, ep_label, start, make);
    if (pd_leg.done) {
      co_return;
    }
    rr.role = routing::RoleWanted::kDecode;  // decode and both nodes; ranked by load, then overlap
  }
  const std::string_view leg_role = disaggregated ? "decode" : kRole;
  const std::string* leg_body = pd_leg.decode_body ? &*pd_leg.decode_body : nullptr;

  // Decide, and resolve the ranked nodes to endpoints, under the lock.
  std::vector<Upstream> ranked;
  routing::Decision decision;
  std::optional<routing::RouteError> route_error;
  {
    const auto t0 = std::chrono::steady_clock::now();
    std::lock_guard lock(g_.core_mu_);
    auto decided = g_.core_.decide(rr);
    const double dt = seconds_since(t0);
    if (!decided.ok()) {
      route_error = decided.error().code;
    } else {
      decision = std::move(*decided);
      if (disaggregated) {
        disagg::order_for_decode(decision.ranked);
      }
      for (const auto& c : decision.ranked) {
        if (ranked.size() >= g_.options_.max_attempts) {
          break;
        }
        const auto* st = g_.core_.node(c.node);
        if (st == nullptr) {
          continue;
        }
        auto it = g_.nodes_.find(st->id);
        if (it != g_.nodes_.end()) {
          ranked.push_back(Upstream{it->first, it->second.endpoint, c.node});
        }
      }
      const double ratio =
          decision.request_blocks > 0
              ? static_cast<double>(decision.ranked.front().overlap_blocks) / decision.request_blocks
              : 0.0;
      g_.metrics_.decision(dt, ratio);
    }
  }
  if (route_error.has_value()) {
    const auto code = *route_error;
    if (code == routing::RouteError::kAllOverloaded) {
      g_.metrics_.admission_rejected(model, "overloaded");
      co_await fail(
          ex,
          too_many_requests("Every node serving '" + model + "' is overloaded; retry later.", "overloaded"),
          request_id, model, ep_label, start, std::max<uint32_t>(1, g_.admission_.retry_after_s()));
    } else {
      co_await fail(ex,
                    service_unavailable("No node can serve model '" + model + "' now (" +
                                            std::string(routing::to_string(code)) + ").",
                                        "no_healthy_node"),
                    request_id, model, ep_label, start);
    }
    co_return;
  }
  if (!decision.deadline_ok) {
    g_.metrics_.admission_rejected(model, "deadline");
    co_await fail(ex,
                  too_many_requests(fmt::format("The estimated time to first token ({:.3f} s) exceeds the "
                                                "X-CGN-Deadline-Ms budget of {} ms.",
                                                decision.ranked.front().ttft_s, deadline_ms),
                                    "deadline_exceeded"),
                  request_id, model, ep_label, start, std::max<uint32_t>(1, g_.admission_.retry_after_s()));
    co_return;
  }

  http::HttpClient& client = *g_.clients_[ex.worker_index()];
  http::ClientTimeouts timeouts;
  timeouts.connect = std::chrono::milliseconds(rc.timeouts.connect_ms);
  timeouts.header = std::chrono::milliseconds(rc.timeouts.first_token_ms);
  timeouts.idle = std::chrono::milliseconds(rc.timeouts.idle_ms);
  timeouts.body = std::chrono::milliseconds(rc.timeouts.request_ms);

  // The last failed attempt's upstream answer (status + body), relayed if every attempt fails.
  std::optional<http::Response> last_answer;
  std::string last_answer_node;
  HttpError last_error = HttpError::connect_failed;
  std::string last_error_text;

  RetryBudget& retries = pd_leg.retries;  // the prefill leg's closes count here too
  bool give_up = false;                   // the retry budget says no further node
  size_t tried = 0;
  for (size_t attempt = 0; attempt < ranked.size() && !give_up; ++attempt) {
    ++tried;
    const Upstream& up = ranked[attempt];
    const bool more = attempt + 1 < ranked.size();
    routing::DispatchTicket ticket;
    {
      std::lock_guard lock(g_.core_mu_);
      ticket = g_.core_.record_dispatch(up.index, rr);
    }
    auto close_ticket = [&] {
      std::lock_guard lock(g_.core_mu_);
      g_.core_.record_completion(ticket);
    };
    // Counts the retry, or notes that the budget ends the request here.
    auto retry_after = [&](AttemptFailure f) {
      if (!retries.allows_retry_after(f)) {
        give_up = true;
        CGN_LOG_WARN(logger(),
                     "a second node closed the connection on this request before answering; not retried",
                     log::kv("request_id", request_id), log::kv("node", up.node), log::kv("model", model));
      } else if (more) {
        g_.metrics_.retry(model, reason_label(f));
        CGN_LOG_DEBUG(logger(), "retrying on the next node", log::kv("request_id", request_id),
                      log::kv("node", up.node), log::kv("reason", reason_label(f)));
      }
    };
    // The body failed before its first byte reached the client: close the ticket and either
    // note why this node failed (true: try the next one) or, when the client itself went
    // away, record that (false: stop).
    auto failed_before_first_byte = [&](const Error<HttpError>& err) {
      close_ticket();
      if (!ex.client_open()) {
        g_.metrics_.request_done(model, ep_label, kClientClosed, seconds_since(start));
        return false;
      }
      last_error = err.code;
      last_error_text = up.node + ": " + err.message;
      retry_after(failure_of(err.code));
      return true;
    };

    http::Upstream target{up.endpoint.host, up.endpoint.port, up.endpoint.tls};
    const http::ClientTimeouts attempt_timeouts = with_continue(timeouts, up.endpoint, rc);
    auto stream = co_await client.stream(
        target,
        upstream_request(req, remote, up.endpoint, ids.upstream, priority, deadline_ms, leg_role, leg_body),
        attempt_timeouts);
    if (!ex.client_open()) {
      close_ticket();
      g_.metrics_.request_done(model, ep_label, kClientClosed, seconds_since(start));
      co_return;
    }
    if (!stream) {
      close_ticket();
      last_error = stream.error().code;
      last_error_text = up.node + ": " + stream.error().message;
      if (last_error == HttpError::connect_failed) {
        g_.mark_refused(up.node);
      }
      retry_after(failure_of(last_error));
      continue;
    }
    const unsigned status = stream->status();
    if (status == 429 || status >= 500) {
      auto body = co_await stream->read_all();
      close_ticket();
      http::Response r{static_cast<http::beast_http::status>(status), 11};
      http::copy_response_headers(stream->headers(), r, /*drop_cognitora=*/true);
      r.body() = body.ok() ? std::move(*body) : std::string();
      last_answer = std::move(r);
      last_answer_node = up.node;
      retry_after(failure_of_answer(status, stream->headers()));
      continue;
    }

    const bool sse = iequals_prefix(stream->headers()[http::Field::content_type], "text/event-stream");
    http::Fields headers = response_headers(stream->headers(), up.node, request_id);
    if (!pd_leg.prefill_node.empty()) {
      headers.set("X-CGN-Prefill-Node", pd_leg.prefill_node);
      g_.metrics_.pd_handoff(seconds_since(pd_leg.answered));
    }

    if (!sse && !pr.stream) {
      // Buffered: the whole body first, so a failure here can still move to the next node.
      auto body = co_await stream->read_all();
      if (!body) {
        if (!failed_before_first_byte(body.error())) {
          co_return;
        }
        continue;
      }
      {
        std::lock_guard lock(g_.core_mu_);
        g_.core_.record_first_token(ticket);
      }
      const Usage usage = parse_usage(*body);
      http::Response res;
      static_cast<http::Fields&>(res) = std::move(headers);  // the fields built once, not copied again
      res.result(static_cast<http::beast_http::status>(status));
      res.version(11);
      res.body() = std::move(*body);
      res.prepare_payload();
      // The node is done once its whole answer is here: release its in-flight accounting before
      // the client sees the answer, or the client's next request is routed as if this one still
      // ran there (and a stale guess elsewhere can win over a confirmed prefix).
      close_ticket();
      (void)co_await ex.respond(std::move(res));
      g_.metrics_.tokens(model, usage.prompt, usage.completion);
      g_.metrics_.request_done(model, ep_label, status, seconds_since(start));
      co_return;
    }

    if (!sse) {
      // A streamed body that is not SSE: raw pieces, each flushed as it arrives.
      auto first = co_await stream->read_some();
      if (!first) {
        if (!failed_before_first_byte(first.error())) {
          co_return;
        }
        continue;
      }
      std::string piece(*first);
      (void)co_await ex.begin_stream(status, std::move(headers));
      bool ok = true;
      while (!piece.empty() && ok) {
        ok = (co_await ex.write(piece)).ok();
        if (!ok) {
          break;
        }
        auto next = co_await stream->read_some();
        if (!next) {
          ok = false;
          ex.abort();
          break;
        }
        piece.assign(*next);
      }
      if (ok) {
        (void)co_await ex.end_stream();
      }
      close_ticket();
      g_.metrics_.request_done(model, ep_label, ex.client_open() ? status : kClientClosed,
                               seconds_since(start));
      co_return;
    }

    // SSE: wait for the first event before answering, so a node that dies first is retried.
    auto first = co_await stream->next_event();
    if (!first) {
      if (!failed_before_first_byte(first.error())) {
        co_return;
      }
      continue;
    }
    auto begun = co_await ex.begin_stream(status, std::move(headers));
    std::optional<http::SseEvent> event = std::move(*first);
    bool first_token = false;
    Usage usage;
    bool client_ok = begun.ok();
    while (client_ok && event.has_value()) {
      if (!first_token && !event->is_done()) {
        first_token = true;
        g_.metrics_.ttft(seconds_since(start));
        std::lock_guard lock(g_.core_mu_);
        g_.core_.record_first_token(ticket);
      }
      if (!event->is_done()) {
        const Usage u = parse_usage(event->data);
        if (u.found) {
          usage = u;
        }
      }
      client_ok = (co_await ex.write_event(*event)).ok();
      if (!client_ok) {
        break;
      }
      // request_ms bounds the whole request; checked between events (a silent node is bounded
      // by idle_ms), so a stream lasts at most request_ms + idle_ms.
      const bool over_budget =
          !event->is_done() && seconds_since(start) * 1000.0 > static_cast<double>(rc.timeouts.request_ms);
      // No co_await inside a conditional expression: GCC 12 mis-handles temporaries there.
      HttpResult<std::optional<http::SseEvent>> next = std::optional<http::SseEvent>{};
      if (over_budget) {
        next = http::http_error(HttpError::timeout, "the request exceeded request_ms (" +
                                                        std::to_string(rc.timeouts.request_ms) + " ms)");
      } else {
        next = co_await stream->next_event();
      }
      if (!next) {
        if (!ex.client_open()) {
          client_ok = false;
          break;
        }
        // The node failed mid-stream: tokens already reached the client, so no retry; end the
        // stream with an error event and [DONE] so the client's parser finishes cleanly.
        CGN_LOG_WARN(logger(), "upstream failed mid-stream", log::kv("request_id", request_id),
                     log::kv("node", up.node), log::kv("error", next.error().message));
        ApiError e =
            next.error().code == HttpError::timeout
                ? gateway_timeout("The node '" + up.node + "' timed out mid-stream: " + next.error().message)
                : bad_gateway("The node '" + up.node + "' failed mid-stream: " + next.error().message);
        http::SseEvent err;
        err.data = e.body();
        (void)co_await ex.write_event(err);
        http::SseEvent done;
        done.data = "[DONE]";
        (void)co_await ex.write_event(done);
        break;
      }
      event = std::move(*next);
    }
    if (client_ok) {
      (void)co_await ex.end_stream();
    }
    close_ticket();
    g_.metrics_.tokens(model, usage.prompt, usage.completion);
    g_.metrics_.request_done(model, ep_label, client_ok && ex.client_open() ? status : kClientClosed,
                             seconds_since(start));
    co_return;
  }

  // Every attempt failed before anything reached the client.
  if (last_answer.has_value()) {
    http::Response res = std::move(*last_answer);
    res.set("X-CGN-Node", last_answer_node);
    res.set("X-Request-Id", request_id);
    res.prepare_payload();
    const unsigned status = res.result_int();
    (void)co_await ex.respond(std::move(res));
    g_.metrics_.request_done(model, ep_label, status, seconds_since(start));
    co_return;
  }
  const std::string what =
      give_up ? fmt::format(
                    "Two nodes closed the connection on this request before answering; it is not "
                    "retried further (it may crash the engine). Last: {}",
                    last_error_text)
              : fmt::format("All {} attempts for model '{}' failed; last: {}", tried, model, last_error_text);
  const ApiError error = last_error == HttpError::timeout ? gateway_timeout(what) : bad_gateway(what);
  co_await fail(ex, error, request_id, model, ep_label, start);
}

// ---------------------------------------------------------------------------------------------

Gateway::Gateway(GatewayOptions options, std::unique_ptr<cluster::StateStore> store, ApiKeys keys)
    : options_(std::move(options)),
      keys_(std::move(keys)),
      rejections_(metrics_, std::chrono::seconds(options_.router.limits.reject_log_interval_s)),
      admission_(options_.router.admission),
      core_(clock_, policy_from_config(options_.router), index_from_config(options_.router), options_.seed),
      handlers_(std::make_unique<Handlers>(*this)),
      store_(std::move(store)) {}

Gateway::~Gateway() {
  stop(std::chrono::milliseconds(0));
}

Result<uint16_t, GatewayError> Gateway::start() {
  if (started_) {
    return make_error(GatewayError::kStart, "gateway already started");
  }
  started_ = true;
  auto listen = parse_listen(options_.router.listen);
  if (!listen) {
    return listen.error();
  }
  http::ServerConfig sc;
  sc.host = listen->first;
  sc.port = listen->second;
  sc.threads = std::max<size_t>(1, options_.threads);
  sc.limits.max_header_bytes = options_.router.limits.max_header_bytes;
  // The body limit is checked by the server (Content-Length, before reading) and again by the
  // parser; both say 413.
  sc.limits.max_body_bytes = options_.router.limits.max_body_bytes;
  sc.tls_cert_file = options_.router.tls_cert;
  sc.tls_key_file = options_.router.tls_key;
  sc.limits.max_connections = options_.router.limits.max_connections;
  sc.limits.max_buffered_bytes = options_.router.limits.max_buffered_bytes;
  if (const auto& mk = options_.router.metrics.key; !mk.env_name().empty()) {
    if (auto st = metrics_key_.add({std::string(mk.reveal())}, "[router.metrics] key_env"); !st) {
      return make_error(GatewayError::kConfig, st.error().message);
    }
  }
  const ApiKeys* metrics_key = metrics_key_.enabled() ? &metrics_key_ : nullptr;
  const bool own_metrics_listener = !options_.router.metrics.listen.empty();
  const IntakeKeys api_keys{&keys_, own_metrics_listener ? nullptr : metrics_key};
  sc.header_check = [this, api_keys](const http::Request& head, std::string_view remote) {
    return check_head(api_keys, rejections_, head, remote);
  };
  sc.on_cap_rejected = [this](std::string_view reason, std::string_view remote) {
    rejections_.note(reason, remote);
  };
  server_ = std::make_unique<http::Server>(sc, handlers_->routes());
  if (own_metrics_listener) {
    auto mlisten = parse_listen(options_.router.metrics.listen);
    if (!mlisten) {
      return mlisten.error();
    }
    http::ServerConfig msc = sc;
    msc.host = mlisten->first;
    msc.port = mlisten->second;
    msc.threads = 1;
    msc.header_check = [this, metrics_only = IntakeKeys{nullptr, metrics_key}](const http::Request& head,
                                                                               std::string_view remote) {
      return check_head(metrics_only, rejections_, head, remote);
    };
    http::RouteTable mroutes;
    mroutes.get("/metrics", http::metrics_handler([this] { return metrics_.render(); }));
    metrics_server_ = std::make_unique<http::Server>(msc, std::move(mroutes));
  }
  http::ClientConfig cc;
  tls::apply(options_.tls, cc);
  cc.timeouts.connect = std::chrono::milliseconds(options_.router.timeouts.connect_ms);
  cc.timeouts.idle = std::chrono::milliseconds(options_.router.timeouts.idle_ms);
  for (size_t i = 0; i < server_->worker_count(); ++i) {
    clients_.push_back(std::make_unique<http::HttpClient>(server_->worker_context(i), cc));
  }
  if (store_) {
    auto st = store_->start([this](const cluster::NodeEvent& ev) { on_node_event(ev); });
    if (!st) {
      return make_error(GatewayError::kStart, st.error().message);
    }
  }
  auto port = server_->start();
  if (!port) {
    if (store_) {
      store_->stop();
    }
    return make_error(GatewayError::kStart,
                      "cannot listen on " + options_.router.listen + ": " + port.error().message);
  }
  port_ = *port;
  if (metrics_server_) {
    auto mport = metrics_server_->start();
    if (!mport) {
      server_->stop(std::chrono::milliseconds(0));
      if (store_) {
        store_->stop();
      }
      return make_error(GatewayError::kStart, "cannot listen on " + options_.router.metrics.listen +
                                                  " ([router.metrics] listen): " + mport.error().message);
    }
    metrics_port_ = *mport;
  }
  // The index changes with every dispatch and every live prefix: its size is read at each scrape,
  // not copied at mirror refreshes (which would show 0 until the first one after traffic).
  metrics_.registry().add_collect_callback([this] {
    size_t entries = 0;
    {
      std::lock_guard lock(core_mu_);
      entries = core_.index().entries();
    }
    metrics_.index_entries(static_cast<double>(entries));
  });
  refresh_cluster_metrics();
  maint_thread_ = std::thread([this] { maintenance_loop(); });
  if (!keys_.enabled()) {
    CGN_LOG_WARN(logger(), "no API keys configured: the gateway is open to anyone who can reach it");
  } else {
    CGN_LOG_INFO(logger(), "API keys loaded", log::kv("count", keys_.size()));
  }
  CGN_LOG_INFO(logger(), "router listening", log::kv("address", sc.host), log::kv("port", port_),
               log::kv("tls", !sc.tls_cert_file.empty()), log::kv("policy", options_.router.policy),
               log::kv("workers", sc.threads));
  return port_;
}

void Gateway::stop(std::chrono::milliseconds grace) {
  if (!started_ || stopped_) {
    return;
  }
  stopped_ = true;
  if (server_) {
    server_->stop(grace);
  }
  if (metrics_server_) {
    metrics_server_->stop(std::chrono::milliseconds(0));
  }
  clients_.clear();
  if (store_) {
    store_->stop();
  }
  {
    std::lock_guard lock(maint_mu_);
    maint_stop_ = true;
  }
  maint_cv_.notify_all();
  if (maint_thread_.joinable()) {
    maint_thread_.join();
  }
}

void Gateway::reload(const config::RouterConfig& cfg) {
  const auto next = policy_from_config(cfg);
  std::string change;
  {
    std::lock_guard lock(core_mu_);
    change = describe_policy_change(core_.policy(), next);
    core_.set_policy(next);
    core_.set_index_config(index_from_config(cfg));
  }
  admission_.set_config(cfg.admission);
  if (change.empty()) {
    CGN_LOG_INFO(logger(), "configuration reloaded; routing policy unchanged");
  } else {
    CGN_LOG_INFO(logger(), "routing policy reloaded", log::kv("changes", change));
  }
}

void Gateway::on_node_event(const cluster::NodeEvent& ev) {
  if (apply_state_event(ev)) {
    return;
  }
  std::lock_guard lock(core_mu_);
  if (ev.kind == cluster::NodeEvent::Kind::kRemove) {
    core_.remove_node(ev.id);
    nodes_.erase(ev.id);
    node_changes_.forget(ev.id);
    request_mirror_refresh();
    return;
  }
  const routing::NodeIndex idx = core_.upsert_node(ev.id, ev.update, ev.source);
  if (idx == routing::kNoNode) {
    CGN_LOG_WARN(logger(), "node table full; node ignored", log::kv("node", ev.id));
    return;
  }
  auto& info = nodes_[ev.id];
  info.name = ev.id;
  info.endpoint = ev.endpoint;
  if (info.endpoint.agent && options_.tls.enabled()) {
    info.endpoint.tls = true;  // [tls]: the router -> agent hop is TLS
  }
  info.index = idx;
  if (ev.update.health.has_value()) {
    const bool up = *ev.update.health == routing::Health::kHealthy;
    if (node_changes_.update(ev.id, up ? "up" : "down", up ? spdlog::level::info : spdlog::level::warn,
                             up ? "node in routing" : "node left routing (health check failed)",
                             log::kv("node", ev.id))) {
      request_mirror_refresh();
    }
  }
}

void Gateway::request_mirror_refresh() {
  {
    std::lock_guard lock(maint_mu_);
    maint_refresh_now_ = true;
  }
  maint_cv_.notify_one();
}

size_t Gateway::healthy_nodes() const {
  std::lock_guard lock(core_mu_);
  size_t n = 0;
  for (const auto& [name, info] : nodes_) {
    const auto* st = core_.node(info.index);
    n += static_cast<size_t>(st != nullptr && st->health == routing::Health::kHealthy &&
                             !core_.stale(info.index));
  }
  return n;
}

size_t Gateway::stale_nodes() const {
  std::lock_guard lock(core_mu_);
  size_t n = 0;
  for (const auto& [name, info] : nodes_) {
    n += static_cast<size_t>(core_.stale(info.index));
  }
  return n;
}

void Gateway::log_stale_nodes(const std::vector<NodeSnapshot>& snap) {
  // Staleness comes with time, not with an event: it is noticed here, once per transition (the
  // next update that brings the node back logs "node in routing" through on_node_event).
  for (const auto& s : snap) {
    if (s.stale) {
      node_changes_.update(s.name, "stale", spdlog::level::warn,
                           "node left routing (its polls have not answered for max_staleness)",
                           log::kv("node", s.name));
    }
  }
}

size_t Gateway::known_nodes() const {
  std::lock_guard lock(core_mu_);
  return nodes_.size();
}

uint64_t Gateway::inflight(std::string_view node) const {
  std::lock_guard lock(core_mu_);
  const auto idx = core_.find_node(node);
  return idx == routing::kNoNode ? 0 : core_.inflight_requests(idx);
}

void Gateway::refresh_cluster_metrics() {
  std::lock_guard refresh_lock(refresh_mu_);
  std::vector<NodeSnapshot> snap;
  {
    std::lock_guard lock(core_mu_);
    for (const auto& [name, info] : nodes_) {
      const auto* st = core_.node(info.index);
      if (st == nullptr) {
        continue;
      }
      NodeSnapshot s;
      s.name = name;
      s.models = st->models;
      s.engine = st->engine;
      s.role = std::string(routing::to_string(st->role));
      s.gpu_name = st->gpu.name;
      s.stale = core_.stale(info.index);
      s.up = st->health == routing::Health::kHealthy && !s.stale;
      s.queue_depth = st->queue_depth;
      s.running = st->running;
      s.kv_used_ratio = st->kv_used_ratio;
      s.power_watts = st->power_watts;
      s.watt_limit = st->watt_limit_watts;
      s.cordoned = st->cordoned;
      snap.push_back(std::move(s));
    }
  }
  log_stale_nodes(snap);
  double watts = 0;
  for (const auto& s : snap) {
    watts += s.power_watts.value_or(0);
  }
  const auto now = std::chrono::steady_clock::now();
  const double gen = metrics_.generation_tokens_total();
  std::optional<double> tpw;  // unknown until a node reports power
  if (last_refresh_ != std::chrono::steady_clock::time_point{} && watts > 0) {
    const double dt = std::chrono::duration<double>(now - last_refresh_).count();
    if (dt > 0) {
      tpw = (gen - last_generation_tokens_) / dt / watts;
    }
  }
  last_refresh_ = now;
  last_generation_tokens_ = gen;
  metrics_.refresh_cluster(snap, tpw);
}

void Gateway::mark_refused(std::string_view node) {
  std::lock_guard lock(core_mu_);
  routing::NodeUpdate u;
  u.health = routing::Health::kUnhealthy;
  (void)core_.upsert_node(node, u, routing::UpdateSource::kScrape);
  if (auto it = nodes_.find(node); it != nodes_.end()) {
    it->second.refused_at = std::chrono::steady_clock::now();
  }
}

void Gateway::readmit_refused() {
  const auto retry = std::chrono::milliseconds(options_.router.timeouts.passive_retry_ms);
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> back;
  {
    std::lock_guard lock(core_mu_);
    for (auto& [name, info] : nodes_) {
      if (!info.refused_at || now - *info.refused_at < retry) {
        continue;
      }
      info.refused_at.reset();
      const auto* st = core_.node(info.index);
      // Only a verdict of our own is lifted: a poll or a record that says unhealthy stands.
      if (st != nullptr && st->health == routing::Health::kUnhealthy &&
          st->last_source == routing::UpdateSource::kScrape) {
        routing::NodeUpdate u;
        u.health = routing::Health::kHealthy;
        (void)core_.upsert_node(name, u, routing::UpdateSource::kScrape);
        back.push_back(name);
      }
    }
  }
  for (const auto& name : back) {
    CGN_LOG_INFO(logger(), "node back in routing after refusing a connection", log::kv("node", name),
                 log::kv("after_ms", options_.router.timeouts.passive_retry_ms));
  }
}

void Gateway::maintenance_loop() {
  // Wakes at least every passive_retry_ms (for readmit_refused); refreshes the mirror every
  // mirror_interval or when asked to.
  const auto tick = std::min<std::chrono::milliseconds>(
      options_.mirror_interval, std::chrono::milliseconds(options_.router.timeouts.passive_retry_ms));
  auto last_mirror = std::chrono::steady_clock::now();
  std::unique_lock lock(maint_mu_);
  while (!maint_stop_) {
    maint_cv_.wait_for(lock, tick, [this] { return maint_stop_ || maint_refresh_now_; });
    if (maint_stop_) {
      break;
    }
    const bool refresh_now = maint_refresh_now_;
    maint_refresh_now_ = false;
    lock.unlock();
    readmit_refused();
    if (refresh_now || std::chrono::steady_clock::now() - last_mirror >= options_.mirror_interval) {
      refresh_cluster_metrics();
      last_mirror = std::chrono::steady_clock::now();
    }
    lock.lock();
  }
}

}  // namespace cgn::router
