#include "power/power_app.h"

#include <fmt/format.h>

#include "core/daemon/daemon.h"
#include "core/http/server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "power/power_grpc.h"
#include "power/power_metrics.h"
#include "power/reader.h"

namespace cgn::power {

namespace {

constexpr std::string_view kName = "cgn-power";

Error<int> failure(std::string_view message) {
  return daemon::failure(kName, message);
}

}  // namespace

PowerApp::PowerApp(PowerSetup setup, const Clock& clock) : setup_(std::move(setup)), clock_(clock) {}

PowerApp::~PowerApp() {
  stop(clock_.now());
}

Nanos PowerApp::shutdown_deadline() const {
  return clock_.now() + daemon::kShutdownGrace;
}

uint16_t PowerApp::grpc_port() const {
  return grpc_ ? grpc_->port() : 0;
}

uint16_t PowerApp::metrics_port() const {
  return http_ ? http_->port() : 0;
}

CliResult<Ok> PowerApp::start() {
  started_ = true;
  const auto& cfg = setup_.config;
  if (auto st = log::configure(cfg.log.level, setup_.log_level, cfg.log.file); !st) {
    return failure(st.error().message);
  }
  auto reader = Reader::from_config(cfg.power, builtin_sources(cfg.tls));
  if (!reader) {
    return failure(reader.error().message);
  }
  reader_ = std::move(*reader);
  reader_->start(std::chrono::milliseconds(cfg.power.poll_interval_ms));
  registry_ = std::make_unique<metrics::Registry>();
  metrics_ = std::make_unique<PowerMetrics>(*registry_, [r = reader_.get()] { return r->snapshot(); });
  if (auto st = start_listeners(); !st) {
    stop(clock_.now());
    return st;
  }
  std::string kinds;
  for (const auto& s : cfg.power.sources) {
    kinds += (kinds.empty() ? "" : ",") + s.name + "=" + s.kind;
  }
  CGN_LOG_INFO(log::get("power"), "serving",
               log::kv("grpc", fmt::format("{} (port {})", cfg.power.listen, grpc_port())),
               log::kv("tls", daemon::tls_mode(cfg.tls)),
               log::kv("metrics", fmt::format("{} (port {})", cfg.power.metrics_listen, metrics_port())),
               log::kv("sources", kinds.empty() ? "none" : kinds),
               log::kv("poll_interval_ms", cfg.power.poll_interval_ms));
  return Ok{};
}

CliResult<Ok> PowerApp::start_listeners() {
  const auto& cfg = setup_.config;
  const auto& p = cfg.power;
  auto http =
      daemon::serve_metrics(kName, "power", p.metrics_listen, [r = registry_.get()] { return r->render(); });
  if (!http) {
    return http.error();
  }
  http_ = std::move(*http);
  auto grpc = PowerGrpcServer::start(p.listen, cfg.tls, *reader_);
  if (!grpc) {
    return failure(fmt::format("[power] listen: {}", grpc.error().message));
  }
  grpc_ = std::move(*grpc);
  return daemon::write_port_files(kName, setup_, grpc_port(), metrics_port());
}

void PowerApp::stop(Nanos deadline) {
  if (!started_ || stopped_) {
    return;
  }
  stopped_ = true;
  if (grpc_) {
    grpc_->stop(daemon::time_left(clock_, deadline));
    grpc_.reset();
  }
  if (http_) {
    http_->stop(std::chrono::milliseconds(0));
    http_.reset();
  }
  metrics_.reset();
  registry_.reset();
  if (reader_) {
    reader_->stop();
    reader_.reset();
  }
}

}  // namespace cgn::power
