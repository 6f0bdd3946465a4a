#include "state/static/static_store.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cluster/node_record.h"
#include "core/http/client.h"
#include "core/log.h"
#include "routing/engine_metrics.h"
#include "state/static/agent_health_client.h"

// GCC 12 at -O1 with sanitizers reports -Wmismatched-new-delete on Asio coroutine frames (it
// sees awaitable_frame_base's operator delete but not the recycling allocator's operator new):
// a false positive, as in src/sim/server.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace cgn::state {

namespace asio = boost::asio;
using routing::Health;
using routing::NodeUpdate;

struct StaticStore::Node {
  StaticNodeSpec spec;
  cluster::NodeEndpoint endpoint;
  // The /metrics mapping; none for engines without one (mlx, cgn-infer): health and models only.
  std::optional<routing::EngineKind> kind;
};

std::string default_node_name(const cluster::NodeEndpoint& endpoint) {
  if (endpoint.host.find(':') != std::string::npos) {
    return "[" + endpoint.host + "]:" + std::to_string(endpoint.port);
  }
  return endpoint.host + ":" + std::to_string(endpoint.port);
}

Result<std::unique_ptr<StaticStore>, cluster::StateError> StaticStore::create(StaticStoreOptions options) {
  std::vector<Node> nodes;
  std::set<std::string> names;
  for (auto& spec : options.nodes) {
    auto ep = cluster::parse_node_url(spec.url);
    if (!ep) {
      return ep.error();
    }
    Node n;
    n.spec = spec;
    n.endpoint = *ep;
    n.endpoint.agent = !spec.agent.empty();
    if (n.spec.name.empty()) {
      n.spec.name = default_node_name(n.endpoint);
    }
    auto kind = routing::parse_engine_kind(spec.engine);
    if (!kind && spec.engine != "mlx" && spec.engine != "cgn-infer") {
      return make_error(cluster::StateError::kConfig,
                        "node \"" + n.spec.name + "\": unknown engine \"" + spec.engine +
                            "\" (vllm, sglang, trtllm, llamacpp, mlx, cgn-infer)");
    }
    n.kind = kind;
    if (!spec.agent.empty() && (spec.agent.rfind(':') == std::string::npos || spec.agent.back() == ':')) {
      return make_error(cluster::StateError::kConfig,
                        "node \"" + n.spec.name + "\": agent \"" + spec.agent + "\" is not HOST:PORT");
    }
    if (!names.insert(n.spec.name).second) {
      return make_error(cluster::StateError::kConfig, "node name \"" + n.spec.name + "\" is used twice");
    }
    nodes.push_back(std::move(n));
  }
  if (options.interval.count() <= 0) {
    return make_error(cluster::StateError::kConfig, "poll interval must be positive");
  }
  return std::unique_ptr<StaticStore>(new StaticStore(std::move(options), std::move(nodes)));
}

StaticStore::StaticStore(StaticStoreOptions options, std::vector<Node> nodes)
    : options_(std::move(options)), nodes_(std::move(nodes)) {}

StaticStore::~StaticStore() {
  stop();
}

namespace {

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);

http::Request get_request(const cluster::NodeEndpoint& ep, std::string_view path) {
  http::Request req{http::Verb::get, ep.base_path + std::string(path), 11};
  req.set(http::Field::user_agent, "cognitora-router");
  return req;
}

// The model ids of an OpenAI /v1/models answer; empty when the body is not one.
std::vector<std::string> parse_models(const std::string& body, size_t max_models) {
  std::vector<std::string> out;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array()) {
    return out;
  }
  for (const auto& m : j["data"]) {
    if (out.size() >= max_models) {
      break;
    }
    if (m.is_object() && m.contains("id") && m["id"].is_string()) {
      const auto& id = m["id"].get_ref<const std::string&>();
      if (!id.empty() && id.size() <= 256) {
        out.push_back(id);
      }
    }
  }
  return out;
}

}  // namespace

Status<cluster::StateError> StaticStore::start(cluster::NodeSink sink) {
  if (started_) {
    return make_error(cluster::StateError::kStart, "static store already started");
  }
  started_ = true;
  sink_ = std::move(sink);
  ctx_ = std::make_unique<asio::io_context>(1);
  http::ClientConfig cc;
  cc.timeouts.connect = options_.poll_timeout;
  cc.timeouts.header = options_.poll_timeout;
  cc.timeouts.body = options_.poll_timeout;
  cc.timeouts.idle = options_.poll_timeout;
  cc.max_body_bytes = 4u << 20;
  cc.max_idle_per_upstream = 2;
  cc.timer_resolution = std::chrono::milliseconds(20);
  client_ = std::make_unique<http::HttpClient>(*ctx_, cc);
  agents_ = std::make_unique<AgentHealthClients>(*ctx_, options_.security);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].spec.agent.empty()) {
      agents_->add(i, nodes_[i].spec.agent);
    }
  }

  // Every node is announced at once with what configuration says, health unknown (not yet
  // routable), so its name and models are known before the first poll answers.
  for (const auto& n : nodes_) {
    cluster::NodeEvent ev;
    ev.id = n.spec.name;
    ev.endpoint = n.endpoint;
    ev.update.address = n.spec.url;
    ev.update.role = n.spec.role;
    ev.update.engine = n.kind ? std::string(routing::to_string(*n.kind)) : n.spec.engine;
    // Alive while this store's polls answer (RoutingPolicy::max_staleness).
    ev.update.liveness = routing::Liveness::kPolled;
    if (!n.spec.models.empty()) {
      ev.update.models = n.spec.models;
    }
    sink_(ev);
  }

  for (size_t i = 0; i < nodes_.size(); ++i) {
    signals_.push_back(std::make_unique<asio::cancellation_signal>());
    asio::co_spawn(*ctx_, nodes_[i].spec.agent.empty() ? poll_loop(i) : agent_poll_loop(i),
                   asio::bind_cancellation_slot(signals_.back()->slot(), asio::detached));
  }
  thread_ = std::thread([this] { ctx_->run(); });
  return Ok{};
}

asio::awaitable<void> StaticStore::poll_loop(size_t i) {
  const Node& n = nodes_[i];
  http::Upstream up{n.endpoint.host, n.endpoint.port, n.endpoint.tls};
  asio::steady_timer timer(*ctx_);
  for (;;) {
    cluster::NodeEvent ev;
    ev.id = n.spec.name;
    ev.endpoint = n.endpoint;
    ev.source = routing::UpdateSource::kScrape;
    auto health = co_await client_->send(up, get_request(n.endpoint, "/health"));
    const auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none) {
      co_return;
    }
    const bool healthy = health.ok() && health->result_int() == 200;
    ev.update.health = healthy ? Health::kHealthy : Health::kUnhealthy;
    if (healthy && n.kind) {
      auto metrics = co_await client_->send(up, get_request(n.endpoint, routing::metrics_path(*n.kind)));
      if (metrics.ok() && metrics->result_int() == 200) {
        auto m = routing::scrape_engine_metrics(*n.kind, metrics->body());
        if (m.ok()) {
          NodeUpdate mu = routing::to_node_update(*m);
          mu.health = ev.update.health;
          ev.update = std::move(mu);
        }
      }
    }
    if (healthy && n.spec.models.empty()) {
      auto models = co_await client_->send(up, get_request(n.endpoint, "/v1/models"));
      if (models.ok() && models->result_int() == 200) {
        auto ids = parse_models(models->body(), options_.max_models_per_node);
        if (!ids.empty()) {
          ev.update.models = std::move(ids);
        }
      }
    }
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
      co_return;
    }
    if (!co_await deliver_then_sleep(ev, timer)) {
      co_return;
    }
  }
}

asio::awaitable<bool> StaticStore::deliver_then_sleep(const cluster::NodeEvent& ev,
                                                      asio::steady_timer& timer) {
  sink_(ev);
  polls_.fetch_add(1, std::memory_order_relaxed);
  timer.expires_after(options_.interval);
  auto [ec] = co_await timer.async_wait(kUseTuple);
  co_return !ec;
}

asio::awaitable<void> StaticStore::agent_poll_loop(size_t i) {
  const Node& n = nodes_[i];
  asio::steady_timer timer(*ctx_);
  auto logger = log::get("state");
  bool last_ok = true;
  for (;;) {
    cluster::NodeEvent ev;
    ev.id = n.spec.name;
    ev.endpoint = n.endpoint;
    ev.source = routing::UpdateSource::kScrape;
    auto h = co_await agents_->health(i, options_.poll_timeout);
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
      co_return;
    }
    if (h.ok()) {
      // The node record is the agent's word on its node; the data path stays the configured URL.
      ev.update = cluster::to_node_update(h->record);
      ev.update.address = n.spec.url;
      if (!n.spec.models.empty()) {
        ev.update.models = n.spec.models;
      } else if (ev.update.models && ev.update.models->empty()) {
        ev.update.models.reset();
      }
    } else {
      ev.update.health = Health::kUnhealthy;
    }
    if (h.ok() != last_ok) {
      last_ok = h.ok();
      if (last_ok) {
        CGN_LOG_INFO(logger, "agent answers Health again", log::kv("node", n.spec.name));
      } else {
        CGN_LOG_WARN(logger, "agent Health failed", log::kv("node", n.spec.name),
                     log::kv("error", h.error().message));
      }
    }
    if (!co_await deliver_then_sleep(ev, timer)) {
      co_return;
    }
  }
}

void StaticStore::stop() {
  if (!started_ || !thread_.joinable()) {
    return;
  }
  asio::post(*ctx_, [this] {
    for (auto& s : signals_) {
      s->emit(asio::cancellation_type::terminal);
    }
  });
  thread_.join();
  if (agents_) {
    agents_->shutdown();  // no gRPC completion is posted to ctx_ after this
    agents_.reset();
  }
  client_.reset();
  ctx_.reset();
  signals_.clear();
}

}  // namespace cgn::state
