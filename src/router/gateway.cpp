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
#include "router/admin_api.h"
#include "router/carbon/providers.h"
#include "router/cascade_plan.h"
#include "router/coro_warnings.h"
#include "router/disagg.h"
#include "router/intake.h"
#include "router/policy_config.h"
#include "router/request_intake.h"
#include "router/request_plan.h"
#include "router/responses.h"
#include "router/router_log.h"

namespace cgn::router {

namespace asio = boost::asio;
using http::Exchange;
using http::HttpError;
using http::HttpResult;

namespace {

// The policy the gateway is built with; an unknown name fails start() (kConfig) before anything
// runs, so the kv default here is never routed with.
routing::RoutingPolicy initial_policy(const config::RouterConfig& cfg) {
  auto p = policy_from_config(cfg);
  return p ? *p : routing::RoutingPolicy{};
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

Result<std::pair<std::string, uint16_t>, GatewayError> parse_listen(std::string_view listen) {
  if (auto hp = split_host_port(listen)) {
    return std::move(*hp);
  }
  return make_error(GatewayError::kConfig, "listen address \"" + std::string(listen) + "\" is not HOST:PORT");
}

// ---------------------------------------------------------------------------------------------
// GatewayHandlers: the coroutines behind each route, over the parts the Gateway lends them.
class GatewayHandlers {
 public:
  struct Parts {
    GatewayServices& services;
    RejectionLog& rejections;
    std::vector<std::unique_ptr<http::HttpClient>>& clients;  // one per server worker
    const std::string& dashboard_dir;
    bool metrics_on_api;  // /metrics on the API listener
    AdminApi& admin;      // /admin/v1/ (admin_api.h)
  };
  explicit GatewayHandlers(Parts p) : p_(p) {}

  http::RouteTable routes();

 private:
  asio::awaitable<void> inference(Exchange& ex, Endpoint endpoint);
  asio::awaitable<void> responses(Exchange& ex);
  asio::awaitable<void> models(Exchange& ex);
  asio::awaitable<void> health(Exchange& ex);
  asio::awaitable<void> dashboard(Exchange& ex);

  Parts p_;
};

http::RouteTable GatewayHandlers::routes() {
  http::RouteTable rt;
  rt.post("/v1/chat/completions", [this](Exchange& ex) { return inference(ex, Endpoint::kChat); });
  rt.post("/v1/completions", [this](Exchange& ex) { return inference(ex, Endpoint::kCompletions); });
  rt.post("/v1/embeddings", [this](Exchange& ex) { return inference(ex, Endpoint::kEmbeddings); });
  rt.post("/v1/responses", [this](Exchange& ex) { return responses(ex); });
  rt.get("/v1/models", [this](Exchange& ex) { return models(ex); });
  rt.get("/health", [this](Exchange& ex) { return health(ex); });
  p_.admin.add_routes(rt);
  if (p_.metrics_on_api) {
    rt.get("/metrics", http::metrics_handler([this] { return p_.services.metrics.render(); }));
    rt.enable_cors("/metrics");
  }
  rt.set_fallback([this](Exchange& ex) { return dashboard(ex); });
  return rt;
}

asio::awaitable<void> GatewayHandlers::health(Exchange& ex) {
  const NodeTable& nodes = p_.services.nodes;
  const size_t healthy = nodes.healthy_nodes();
  nlohmann::json j = {{"status", healthy > 0 ? "ok" : "degraded"},
                      {"nodes", nodes.known_nodes()},
                      {"nodes_healthy", healthy},
                      {"nodes_stale", nodes.stale_nodes()}};
  (void)co_await ex.respond(http::make_response(200, j.dump()));
}

asio::awaitable<void> GatewayHandlers::models(Exchange& ex) {
  const std::string request_id = request_ids(ex.request()).client;
  nlohmann::json data = nlohmann::json::array();
  for (const auto& id : p_.services.nodes.healthy_models()) {
    data.push_back({{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "cognitora"}});
  }
  http::Response res = http::make_response(200, nlohmann::json{{"object", "list"}, {"data", data}}.dump());
  res.set("X-Request-Id", request_id);
  (void)co_await ex.respond(std::move(res));
}

asio::awaitable<void> GatewayHandlers::inference(Exchange& ex, Endpoint endpoint) {
  // The API key was checked with the headers (intake.h), before the body was read.
  std::optional<Admitted> admitted = co_await admit(ex, endpoint, p_.services, p_.rejections);
  if (!admitted) {
    co_return;
  }
  Dispatcher d(p_.services, *p_.clients[ex.worker_index()]);
  if (admitted->cascade != nullptr) {
    CascadePlan plan(p_.services, admitted->cascade_alias, *admitted->cascade, admitted->has_tools,
                     std::move(admitted->cascade_digests));
    co_await plan.serve(admitted->ctx, d);
  } else if (admitted->disaggregated) {
    PdPlan plan(p_.services);
    co_await plan.serve(admitted->ctx, d);
  } else {
    AggregatedPlan plan(p_.services);
    co_await plan.serve(admitted->ctx, d);
  }
}

asio::awaitable<void> GatewayHandlers::responses(Exchange& ex) {
  std::optional<Admitted> admitted = co_await admit(ex, Endpoint::kChat, p_.services, p_.rejections, true);
  if (!admitted) {
    co_return;
  }
  Dispatcher d(p_.services, *p_.clients[ex.worker_index()]);
  ResponsesPlan plan(p_.services, std::move(admitted->previous_response_id));
  co_await plan.serve(admitted->ctx, d);
}

asio::awaitable<void> GatewayHandlers::dashboard(Exchange& ex) {
  std::string_view path = http::path_of(ex.request().target());
  const std::string& dir = p_.dashboard_dir;
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

// ---------------------------------------------------------------------------------------------

Gateway::Gateway(GatewayOptions options, std::unique_ptr<cluster::StateStore> store, ApiKeys keys)
    : options_(std::move(options)),
      keys_(std::move(keys)),
      rejections_(metrics_, std::chrono::seconds(options_.router.limits.reject_log_interval_s)),
      admission_(options_.router.admission),
      nodes_(clock_, initial_policy(options_.router), index_from_config(options_.router), options_.seed),
      services_{
          nodes_,     metrics_, admission_, options_.router, options_.cluster_token, options_.max_attempts,
          &responses_},
      admin_(std::make_unique<AdminApi>(services_, rejections_)),
      handlers_(std::make_unique<GatewayHandlers>(
          GatewayHandlers::Parts{services_, rejections_, clients_, options_.dashboard_dir,
                                 options_.router.metrics.listen.empty(), *admin_})),
      store_(std::move(store)) {}

Gateway::~Gateway() {
  stop(std::chrono::milliseconds(0));
}

Result<uint16_t, GatewayError> Gateway::start() {
  if (started_) {
    return make_error(GatewayError::kStart, "gateway already started");
  }
  started_ = true;
  if (auto policy = policy_from_config(options_.router); !policy) {
    return make_error(GatewayError::kConfig, "[router] policy: " + policy.error().message);
  }
  if (auto st = build_carbon(); !st) {
    return st.error();
  }
  auto sc = build_servers();
  if (!sc) {
    return sc.error();
  }
  if (auto st = listen(); !st) {
    return st.error();
  }
  // The index changes with every dispatch and every live prefix: its size is read at each scrape,
  // not copied at mirror refreshes (which would show 0 until the first one after traffic).
  metrics_.registry().add_collect_callback(
      [this] { metrics_.index_entries(static_cast<double>(nodes_.index_entries())); });
  refresh_cluster_metrics();
  maint_thread_ = std::thread([this] { maintenance_loop(); });
  if (carbon_poller_) {
    carbon_poller_->start();
  }
  if (!keys_.enabled()) {
    CGN_LOG_WARN(router_log(), "no API keys configured: the gateway is open to anyone who can reach it");
  } else {
    CGN_LOG_INFO(router_log(), "API keys loaded", log::kv("count", keys_.size()));
  }
  CGN_LOG_INFO(router_log(), "router listening", log::kv("address", sc->host), log::kv("port", port_),
               log::kv("tls", !sc->tls_cert_file.empty()), log::kv("policy", options_.router.policy),
               log::kv("workers", sc->threads));
  return port_;
}

Status<GatewayError> Gateway::build_carbon() {
  const config::CarbonConfig& c = options_.router.carbon;
  if (c.provider == "off") {
    return Ok{};
  }
  auto provider = carbon::make_provider(c);
  if (!provider) {
    return make_error(GatewayError::kConfig, provider.error().message);
  }
  carbon::GateOptions go{c.threshold_gco2_per_kwh, Nanos{c.poll_interval_ms} * kNanosPerMilli, c.provider,
                         c.zone};
  carbon_gate_ = std::make_unique<carbon::Gate>(std::move(go), clock_);
  carbon::PollerOptions po;
  po.interval = Nanos{c.poll_interval_ms} * kNanosPerMilli;
  po.timeout = Nanos{c.timeout_ms} * kNanosPerMilli;
  po.max_backoff = Nanos{c.max_backoff_ms} * kNanosPerMilli;
  po.on_failure = [this](carbon::FetchReason r) { metrics_.carbon_poll_failed(carbon::reason_label(r)); };
  carbon_poller_ =
      std::make_unique<carbon::Poller>(std::move(*provider), *carbon_gate_, std::move(po), clock_);
  services_.carbon = carbon_gate_.get();
  metrics_.registry().add_collect_callback([this] {
    const auto snap = carbon_gate_->snapshot();
    const auto& o = carbon_gate_->options();
    metrics_.carbon_state(o.provider, o.zone, snap.gco2_per_kwh, snap.age_s, carbon::state_label(snap.state),
                          carbon::kGateStateLabels);
  });
  CGN_LOG_INFO(router_log(), "carbon gate on", log::kv("provider", c.provider), log::kv("zone", c.zone),
               log::kv("threshold_gco2_per_kwh", c.threshold_gco2_per_kwh),
               log::kv("poll_interval_ms", c.poll_interval_ms));
  return Ok{};
}

Result<http::ServerConfig, GatewayError> Gateway::build_servers() {
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
  if (const auto& ak = options_.router.admin.key; !ak.env_name().empty()) {
    ApiKeys admin_key;
    if (auto st = admin_key.add({std::string(ak.reveal())}, "[router.admin] key_env"); !st) {
      return make_error(GatewayError::kConfig, st.error().message);
    }
    admin_->set_key(std::move(admin_key));
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
  head_check_ = sc.header_check;
  local_routes_ = handlers_->routes();
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
  return sc;
}

Status<GatewayError> Gateway::listen() {
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
  return Ok{};
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
  if (carbon_poller_) {
    carbon_poller_->stop();
  }
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

Status<GatewayError> Gateway::reload(const config::RouterConfig& cfg) {
  const auto next = policy_from_config(cfg);
  if (!next) {
    return make_error(GatewayError::kConfig, "[router] policy: " + next.error().message);
  }
  std::string change;
  nodes_.locked([&](routing::RoutingCore& core, NodeTable::Nodes&) {
    change = describe_policy_change(core.policy(), *next);
    core.set_policy(*next);
    core.set_index_config(index_from_config(cfg));
  });
  admission_.set_config(cfg.admission);
  if (change.empty()) {
    CGN_LOG_INFO(router_log(), "configuration reloaded; routing policy unchanged");
  } else {
    CGN_LOG_INFO(router_log(), "routing policy reloaded", log::kv("changes", change));
  }
  return Ok{};
}

void Gateway::on_node_event(const cluster::NodeEvent& ev) {
  if (apply_state_event(ev)) {
    return;
  }
  const bool changed = nodes_.locked([&](routing::RoutingCore& core, NodeTable::Nodes& nodes) {
    if (ev.kind == cluster::NodeEvent::Kind::kRemove) {
      core.remove_node(ev.id);
      nodes.erase(ev.id);
      node_changes_.forget(ev.id);
      request_mirror_refresh();
      return true;
    }
    const routing::NodeIndex idx = core.upsert_node(ev.id, ev.update, ev.source);
    if (idx == routing::kNoNode) {
      CGN_LOG_WARN(router_log(), "node table full; node ignored", log::kv("node", ev.id));
      return false;
    }
    auto& info = nodes[ev.id];
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
        return true;
      }
    }
    return false;
  });
  if (changed) {
    nodes_.notify_health();
  }
}

void Gateway::set_health_listener(std::function<void()> f) {
  nodes_.set_health_listener(std::move(f));
}

void Gateway::request_mirror_refresh() {
  {
    std::lock_guard lock(maint_mu_);
    maint_refresh_now_ = true;
  }
  maint_cv_.notify_one();
}

size_t Gateway::healthy_nodes() const {
  return nodes_.healthy_nodes();
}

size_t Gateway::stale_nodes() const {
  return nodes_.stale_nodes();
}

void Gateway::log_stale_nodes(const std::vector<NodeSnapshot>& snap) {
  // Staleness comes with time, not with an event: it is noticed here, once per transition (the
  // next update that brings the node back logs "node in routing" through on_node_event).
  bool changed = false;
  for (const auto& s : snap) {
    if (s.stale) {
      changed |= node_changes_.update(s.name, "stale", spdlog::level::warn,
                                      "node left routing (its polls have not answered for max_staleness)",
                                      log::kv("node", s.name));
    }
  }
  if (changed) {
    nodes_.notify_health();
  }
}

size_t Gateway::known_nodes() const {
  return nodes_.known_nodes();
}

uint64_t Gateway::inflight(std::string_view node) const {
  return nodes_.inflight(node);
}

void Gateway::refresh_cluster_metrics() {
  std::lock_guard refresh_lock(refresh_mu_);
  std::vector<NodeSnapshot> snap;
  nodes_.locked([&](routing::RoutingCore& core, NodeTable::Nodes& nodes) {
    for (const auto& [name, info] : nodes) {
      const auto* st = core.node(info.index);
      if (st == nullptr) {
        continue;
      }
      NodeSnapshot s;
      s.name = name;
      s.models = st->models;
      s.engine = st->engine;
      s.role = std::string(routing::to_string(st->role));
      s.gpu_name = st->gpu.name;
      s.stale = core.stale(info.index);
      s.up = st->health == routing::Health::kHealthy && !s.stale;
      s.queue_depth = st->queue_depth;
      s.running = st->running;
      s.kv_used_ratio = st->kv_used_ratio;
      s.power_watts = st->power_watts;
      s.energy_joules = st->energy_joules;
      s.watt_limit = st->watt_limit_watts;
      s.cordoned = st->cordoned;
      snap.push_back(std::move(s));
    }
  });
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

void Gateway::readmit_refused() {
  const auto retry = std::chrono::milliseconds(options_.router.timeouts.passive_retry_ms);
  for (const auto& name : nodes_.readmit_refused(retry)) {
    CGN_LOG_INFO(router_log(), "node back in routing after refusing a connection", log::kv("node", name),
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
