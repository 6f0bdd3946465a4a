#include "router/router_app.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/log.h"
#include "router/router_log.h"
#include "router/state_backend.h"

namespace cgn::router {

namespace {

Error<int> failure(int status, const std::string& why) {
  return cli_exit(status, "cgn-router: " + why + "\n");
}

// [router.grpc] over `gw`'s HTTP pipeline (set once it has started). Declares the gRPC call
// counter.
grpc_api::GrpcApiOptions grpc_options(const config::RouterConfig& rc, Gateway& gw) {
  grpc_api::GrpcApiOptions o;
  o.listen = rc.grpc.listen;
  o.tls_cert = rc.grpc.tls_cert;
  o.tls_key = rc.grpc.tls_key;
  o.tls_client_ca = rc.grpc.tls_client_ca;
  o.max_message_bytes = rc.limits.max_body_bytes;
  o.serving = [&gw] { return gw.healthy_nodes() > 0; };
  o.requests = &gw.metrics().grpc_requests();
  return o;
}

}  // namespace

CliResult<RouterSetup> parse_router_command(int argc, const char* const* argv,
                                            const std::string& source_dashboard) {
  std::error_code ec;
  const auto exe = std::filesystem::canonical("/proc/self/exe", ec);
  auto setup = parse_router_options(argc, argv, ec ? "." : exe.parent_path().string(), source_dashboard);
  if (!setup) {
    return failure(2, setup.error().message);
  }
  if (setup->help) {
    return cli_exit(0, setup->help_text);
  }
  if (setup->print_config) {
    return cli_exit(0, config::dump_config(setup->config));
  }
  return std::move(*setup);
}

RouterApp::RouterApp(RouterSetup setup, const Clock& clock) : setup_(std::move(setup)), clock_(clock) {}

RouterApp::~RouterApp() {
  stop(clock_.now());
}

CliResult<uint16_t> RouterApp::start() {
  const auto& cfg = setup_.config;
  if (auto st = log::configure(cfg.log.level, setup_.log_level, cfg.log.file); !st) {
    return failure(2, st.error().message);
  }
  auto keys = load_api_keys(cfg.router);
  if (!keys) {
    return failure(2, keys.error().message);
  }
  auto store = make_state_store(cfg, setup_.poll_interval);
  if (!store) {
    return failure(2, store.error().message);
  }
  // The backend's own counters (gossip: cgn_gossip_*) go on the router's /metrics.
  cluster::StateStore* backend = store->get();
  gateway_ = std::make_unique<Gateway>(setup_.gateway, std::move(*store), std::move(*keys));
  backend->attach_metrics(gateway_->metrics().registry());
  auto grpc_opts = grpc_options(cfg.router, *gateway_);
  auto port = gateway_->start();
  if (!port) {
    gateway_.reset();  // stops whatever half of it started
    return failure(1, port.error().message);
  }
  port_ = *port;
  if (!cfg.router.grpc.listen.empty()) {
    grpc_opts.check_head = gateway_->head_check();
    grpc_opts.routes = &gateway_->local_routes();
    grpc_opts.http_server = gateway_->server();
    grpc_ = std::make_unique<grpc_api::GrpcApi>(std::move(grpc_opts));
    auto gport = grpc_->start();
    if (!gport) {
      grpc_.reset();
      stop(clock_.now());
      gateway_.reset();
      return failure(gport.error().code == grpc_api::GrpcApiError::kConfig ? 2 : 1, gport.error().message);
    }
    grpc_port_ = *gport;
    // Health follows the nodes as they change, not a poll later; a change between start() and
    // here is picked up by the explicit call.
    gateway_->set_health_listener([g = grpc_.get()] { g->health_changed(); });
    grpc_->health_changed();
  }
  if (!setup_.port_file.empty()) {
    if (auto written = write_port_file(setup_.port_file, port_); !written) {
      stop(clock_.now());
      gateway_.reset();
      return failure(2, "--port-file: " + written.error().message);
    }
  }
  return port_;
}

void RouterApp::stop(Nanos deadline) {
  if (!gateway_ || stopped_) {
    return;
  }
  stopped_ = true;
  const auto grace = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::nanoseconds(std::max<Nanos>(0, deadline - clock_.now())));
  CGN_LOG_INFO(router_log(), "shutting down", log::kv("grace_ms", grace.count()));
  if (grpc_) {
    gateway_->set_health_listener(nullptr);
    grpc_->stop(grace);
  }
  gateway_->stop(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::nanoseconds(std::max<Nanos>(0, deadline - clock_.now()))));
}

Nanos RouterApp::shutdown_deadline() const {
  return clock_.now() + setup_.config.router.timeouts.shutdown_grace_ms * kNanosPerMilli;
}

Status<OptionsError> RouterApp::reload() {
  if (setup_.config_path.empty()) {
    CGN_LOG_WARN(router_log(), "SIGHUP ignored: no --config file to reload");
    return make_error(OptionsError::kUsage, "no --config file to reload");
  }
  auto cfg = config::load_config(setup_.config_path);
  if (!cfg) {
    CGN_LOG_ERROR(router_log(), "reload failed; keeping the current policy",
                  log::kv("error", cfg.error().message));
    return make_error(OptionsError::kConfig, cfg.error().message);
  }
  if (gateway_ && !stopped_) {
    if (auto st = gateway_->reload(cfg->router); !st) {
      CGN_LOG_ERROR(router_log(), "reload failed; keeping the current policy",
                    log::kv("error", st.error().message));
      return make_error(OptionsError::kConfig, st.error().message);
    }
  }
  return Ok{};
}

}  // namespace cgn::router
