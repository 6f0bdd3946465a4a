#include "kvcached/kvcached_app.h"

#include <fmt/format.h>

#include "core/daemon/daemon.h"
#include "core/http/server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "kvcache/block_store.h"
#include "kvcached/fast_path_server.h"
#include "kvcached/kv_service.h"
#include "kvcached/kvcached_metrics.h"

namespace cgn::kvcached {

namespace {

constexpr std::string_view kName = "cgn-kvcached";

Error<int> failure(std::string_view message) {
  return daemon::failure(kName, message);
}

}  // namespace

KvcachedApp::KvcachedApp(KvcachedSetup setup, const Clock& clock) : setup_(std::move(setup)), clock_(clock) {}

KvcachedApp::~KvcachedApp() {
  stop(clock_.now());
}

Nanos KvcachedApp::shutdown_deadline() const {
  return clock_.now() + daemon::kShutdownGrace;
}

uint16_t KvcachedApp::grpc_port() const {
  return grpc_ ? grpc_->port() : 0;
}

uint16_t KvcachedApp::metrics_port() const {
  return http_ ? http_->port() : 0;
}

CliResult<Ok> KvcachedApp::start(std::function<bool()> stop_requested) {
  started_ = true;
  const auto& cfg = setup_.config;
  if (auto st = log::configure(cfg.log.level, setup_.log_level, cfg.log.file); !st) {
    return failure(st.error().message);
  }
  kvcache::StoreConfig store_cfg = store_config(cfg.kvcached);
  store_cfg.stop_requested = std::move(stop_requested);
  CGN_LOG_INFO(log::get("kvcached"), "allocating the RAM arena",
               log::kv("ram_bytes", cfg.kvcached.ram_bytes));
  auto store = kvcache::BlockStore::open(store_cfg, clock_);
  if (!store && store.error().code == kvcache::StoreError::kStopped) {
    CGN_LOG_INFO(log::get("kvcached"), "stopped before serving", log::kv("why", store.error().message));
    return cli_exit(0, "");
  }
  if (!store) {
    return failure(fmt::format("the block store: {}", store.error().message));
  }
  store_ = std::move(*store);
  registry_ = std::make_unique<metrics::Registry>();
  metrics_ = std::make_unique<KvcachedMetrics>(*registry_, [s = store_.get()] { return s->stats(); });
  if (auto st = start_listeners(); !st) {
    stop(clock_.now());
    return st;
  }
  const auto& k = cfg.kvcached;
  const kvcache::StoreStats s = store_->stats();
  CGN_LOG_INFO(
      log::get("kvcached"), "serving", log::kv("grpc", fmt::format("{} (port {})", k.listen, grpc_port())),
      log::kv("tls", daemon::tls_mode(cfg.tls)),
      log::kv("metrics", fmt::format("{} (port {})", k.metrics_listen, metrics_port())),
      log::kv("socket", k.socket.empty() ? "off" : k.socket), log::kv("ram_bytes", k.ram_bytes),
      log::kv("ssd_dir", k.ssd_dir.empty() ? "off" : k.ssd_dir), log::kv("ssd_max_bytes", k.ssd_max_bytes),
      log::kv("ssd_io", k.ssd_dir.empty() ? "n/a" : (s.ssd_direct_io ? "o_direct" : "buffered")),
      log::kv("scan",
              k.ssd_dir.empty()
                  ? "none"
                  : (s.scan_complete ? "complete" : fmt::format("started ({} bytes)", s.scan_bytes_total))));
  return Ok{};
}

CliResult<Ok> KvcachedApp::start_listeners() {
  const auto& cfg = setup_.config;
  const auto& k = cfg.kvcached;
  auto http = daemon::serve_metrics(kName, "kvcached", k.metrics_listen,
                                    [r = registry_.get()] { return r->render(); });
  if (!http) {
    return http.error();
  }
  http_ = std::move(*http);
  auto grpc = KvGrpcServer::start(k.listen, cfg.tls, *store_, k.max_block_bytes, *metrics_, clock_);
  if (!grpc) {
    return failure(fmt::format("[kvcached] listen: {}", grpc.error().message));
  }
  grpc_ = std::move(*grpc);
  if (!k.socket.empty()) {
    auto fast = FastPathServer::start(k.socket, *store_, {k.max_connections, k.max_handles_per_connection},
                                      *metrics_, clock_);
    if (!fast) {
      return failure(fmt::format("[kvcached] socket: {}", fast.error().message));
    }
    fast_ = std::move(*fast);
  }
  return daemon::write_port_files(kName, setup_, grpc_port(), metrics_port());
}

void KvcachedApp::stop(Nanos deadline) {
  if (!started_ || stopped_) {
    return;
  }
  stopped_ = true;
  if (fast_) {
    fast_->stop();
    fast_.reset();
  }
  if (grpc_) {
    grpc_->stop(daemon::time_left(clock_, deadline));
    grpc_.reset();
  }
  if (http_) {
    http_->stop(std::chrono::milliseconds(0));
    http_.reset();
  }
  metrics_.reset();
  if (store_) {
    store_->stop();
    store_.reset();
  }
  registry_.reset();
}

}  // namespace cgn::kvcached
