#include "agent/node_agent.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "agent/loopback_get.h"
#include "core/log.h"

namespace cgn::agent {

namespace {
const log::Logger& logger() {
  static const log::Logger l = log::get("agent");
  return l;
}
}  // namespace

std::optional<cluster::EpochBump> apply_scrape(cluster::NodeRecord& record, cluster::KvEpochTracker& tracker,
                                               const routing::NodeMetrics& m, uint64_t engine_starts) {
  const routing::NodeUpdate u = routing::to_node_update(m);
  record.queue_depth = m.queue_depth;
  record.running = m.running;
  record.total_blocks = m.total_blocks;
  record.free_blocks = u.free_blocks;
  record.block_size = m.block_size_tokens;
  auto bump = tracker.observe(cluster::PoolSample{engine_starts, m.total_blocks, u.free_blocks, m.running});
  record.kv_epoch = tracker.epoch();
  return bump;
}

uint32_t sglang_page_size(const std::vector<std::string>& extra_args) {
  std::string_view value;
  for (size_t i = 0; i < extra_args.size(); ++i) {
    std::string_view a = extra_args[i];
    if (a == "--page-size" && i + 1 < extra_args.size()) {
      value = extra_args[i + 1];
    } else if (a.starts_with("--page-size=")) {
      value = a.substr(12);
    }
  }
  uint32_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  return ec == std::errc() && p == value.data() + value.size() && n > 0 ? n : 1;
}

Result<routing::NodeMetrics, std::string> scrape_engine(const std::string& host, uint16_t port,
                                                        const std::string& path, routing::EngineKind kind,
                                                        const routing::MapperOptions& mapper,
                                                        std::chrono::milliseconds timeout) {
  auto reply = loopback_get(host, port, path, timeout);
  if (!reply.ok()) {
    return make_error(std::string("scrape"), fmt::format("GET {}: {}", path, reply.error().message));
  }
  if (reply->status != 200) {
    return make_error(std::string("scrape"), fmt::format("GET {}: status {}", path, reply->status));
  }
  auto metrics = routing::scrape_engine_metrics(kind, reply->body, mapper);
  if (!metrics.ok()) {
    return make_error(std::string("scrape"), fmt::format("GET {}: {}", path, metrics.error().message));
  }
  return *metrics;
}

double effective_watt_limit(double configured, std::optional<double> enforced) {
  if (enforced && *enforced > 0) {
    return configured > 0 ? std::min(configured, *enforced) : *enforced;
  }
  return configured > 0 ? configured : 0.0;
}

void apply_power(cluster::NodeRecord& record, double configured_limit, const PowerFigures& p) {
  record.power_watts = p.watts;
  record.energy_joules = p.energy_joules;
  record.watt_limit = effective_watt_limit(configured_limit, p.enforced_limit_watts);
}

Result<std::unique_ptr<NodeAgent>, DriverError> NodeAgent::create(const EngineDriver& driver,
                                                                  NodeAgentOptions options) {
  auto command = driver.launch_command(options.engine, options.launch);
  if (!command.ok()) {
    return command.error();
  }
  if (options.supervisor.port == 0) {
    options.supervisor.port = options.engine.port;
  }
  if (options.mapper.sglang_page_size <= 1) {
    // The whole command line: --page-size comes from [engine] page_size or from extra_args.
    options.mapper.sglang_page_size = sglang_page_size(command->argv);
  }
  if (options.mapper.model.empty()) {
    options.mapper.model = detail::served_name_or_model(options.engine);
  }
  std::unique_ptr<NodeAgent> agent(new NodeAgent(driver, std::move(options), std::move(*command)));
  return agent;
}

NodeAgent::NodeAgent(const EngineDriver& driver, NodeAgentOptions options, LaunchCommand command)
    : options_(std::move(options)),
      command_(std::move(command)),
      metrics_path_(driver.metrics_path(options_.launch)),
      metrics_kind_(driver.metrics_kind(options_.launch)),
      record_(options_.base),
      tracker_(options_.base.generation),
      configured_limit_(options_.base.watt_limit) {
  record_.kv_epoch = tracker_.epoch();
  supervisor_ = std::make_unique<Supervisor>(command_, driver.health(options_.launch), options_.supervisor,
                                             [this](const StateChange& c) { on_state(c); });
}

NodeAgent::~NodeAgent() {
  stop();
}

void NodeAgent::start() {
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  supervisor_->start();
  if ((metrics_path_ && metrics_kind_) || options_.power) {
    scraper_ = std::thread([this] { scrape_loop(); });
  }
}

void NodeAgent::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (scraper_.joinable()) {
    scraper_.join();
  }
  supervisor_->stop();
}

cluster::NodeRecord NodeAgent::record() const {
  std::lock_guard lock(mu_);
  return record_;
}

void NodeAgent::set_watt_limit(double configured) {
  std::lock_guard lock(mu_);
  configured_limit_ = configured;
  record_.watt_limit = effective_watt_limit(configured_limit_, enforced_limit_);
}

void NodeAgent::on_state(const StateChange& change) {
  std::lock_guard lock(mu_);
  record_.ready = change.state == cluster::EngineState::kReady;
  if (change.state == cluster::EngineState::kStarting) {
    // A new engine process: whatever the old one cached is gone, even before the first scrape.
    if (auto bump = tracker_.observe(cluster::PoolSample{change.starts, 0, std::nullopt, std::nullopt})) {
      CGN_LOG_INFO(logger(), "kv_epoch bumped", log::kv("reason", to_string(*bump)),
                   log::kv("epoch", tracker_.epoch()));
    }
    record_.kv_epoch = tracker_.epoch();
    record_.queue_depth.reset();
    record_.running.reset();
    record_.free_blocks.reset();
  }
}

void NodeAgent::scrape_loop() {
  for (;;) {
    if (options_.power) {
      const PowerFigures p = options_.power();
      std::lock_guard lock(mu_);
      enforced_limit_ = p.enforced_limit_watts;
      apply_power(record_, configured_limit_, p);
    }
    if (metrics_path_ && metrics_kind_ && supervisor_->state() == cluster::EngineState::kReady) {
      auto m = scrape_engine(options_.supervisor.host, options_.supervisor.port, *metrics_path_,
                             *metrics_kind_, options_.mapper, options_.scrape_timeout);
      std::lock_guard lock(mu_);
      if (m.ok()) {
        if (auto bump = apply_scrape(record_, tracker_, *m, supervisor_->starts())) {
          CGN_LOG_INFO(logger(), "kv_epoch bumped", log::kv("reason", to_string(*bump)),
                       log::kv("epoch", tracker_.epoch()));
        }
      } else {
        CGN_LOG_DEBUG(logger(), "engine scrape failed", log::kv("error", m.error().message));
      }
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, options_.scrape_interval, [this] { return stopping_; })) {
      return;
    }
  }
}

}  // namespace cgn::agent
