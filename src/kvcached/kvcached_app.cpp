#include "kvcached/kvcached_app.h"

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/host_port.h"
#include "core/http/server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "kvcache/block_store.h"
#include "kvcached/fast_path_server.h"
#include "kvcached/kv_service.h"
#include "kvcached/kvcached_metrics.h"

namespace cgn::kvcached {

namespace {

Error<int> failure(const std::string& message) {
  return cli_exit(2, "cgn-kvcached: " + message + "\n");
}

constexpr Nanos kShutdownGrace = 5 * kNanosPerSecond;

}  // namespace

KvcachedApp::KvcachedApp(KvcachedSetup setup, const Clock& clock) : setup_(std::move(setup)), clock_(clock) {}

KvcachedApp::~KvcachedApp() {
  stop(clock_.now());
}

Nanos KvcachedApp::shutdown_deadline() const {
  return clock_.now() + kShutdownGrace;
}

uint16_t KvcachedApp::grpc_port() const {
  return grpc_ ? grpc_->port() : 0;
}

uint16_t KvcachedApp::metrics_port() const {
  return http_ ? http_->port() : 0;
}

CliResult<Ok> KvcachedApp::start() {
  started_ = true;
  const auto& cfg = setup_.config;
  if (auto st = log::configure(cfg.log.level, setup_.log_level, cfg.log.file); !st) {
    return failure(st.error().message);
  }
  auto store = kvcache::BlockStore::open(store_config(cfg.kvcached), clock_);
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
      log::kv("tls", cfg.tls.enabled() ? (cfg.tls.require_client_cert ? "mtls" : "tls") : "off"),
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
  auto hp = split_host_port(k.metrics_listen);
  if (!hp) {
    return failure(fmt::format("[kvcached] metrics_listen \"{}\" is not HOST:PORT", k.metrics_listen));
  }
  http::ServerConfig sc;
  sc.host = hp->first;
  sc.port = hp->second;
  sc.threads = 1;
  http::RouteTable routes;
  routes.get("/metrics", http::metrics_handler([r = registry_.get()] { return r->render(); }));
  http_ = std::make_unique<http::Server>(sc, std::move(routes));
  if (auto bound = http_->start(); !bound) {
    http_.reset();
    return failure(fmt::format("[kvcached] metrics_listen {}: {}", k.metrics_listen, bound.error().message));
  }
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
  if (!setup_.port_file.empty()) {
    if (auto w = write_port_file(setup_.port_file, grpc_port()); !w) {
      return failure(fmt::format("--port-file: {}", w.error().message));
    }
  }
  if (!setup_.metrics_port_file.empty()) {
    if (auto w = write_port_file(setup_.metrics_port_file, metrics_port()); !w) {
      return failure(fmt::format("--metrics-port-file: {}", w.error().message));
    }
  }
  return Ok{};
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
    const Nanos left = std::max<Nanos>(0, deadline - clock_.now());
    grpc_->stop(std::chrono::milliseconds(left / kNanosPerMilli));
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
