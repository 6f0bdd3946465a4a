// cgn-router: flags and configuration -> Gateway -> wait for signals. SIGTERM/SIGINT stop with
// the configured grace; SIGHUP reloads the routing policy and weights from --config.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/log.h"
#include "router/gateway.h"
#include "router/options.h"
#include "router/state_backend.h"

#ifndef CGN_SOURCE_DASHBOARD_DIR
#define CGN_SOURCE_DASHBOARD_DIR ""
#endif

int main(int argc, char** argv) {
  using namespace cgn;
  std::error_code ec;
  const auto exe = std::filesystem::canonical("/proc/self/exe", ec);
  auto setup = router::parse_router_options(argc, argv, ec ? "." : exe.parent_path().string(),
                                            CGN_SOURCE_DASHBOARD_DIR);
  if (!setup) {
    std::cerr << "cgn-router: " << setup.error().message << "\n";
    return 2;
  }
  if (setup->help) {
    std::cout << setup->help_text;
    return 0;
  }
  if (setup->print_config) {
    std::cout << config::dump_config(setup->config);
    return 0;
  }
  if (auto st = log::configure(setup->config.log.level, setup->log_level, setup->config.log.file); !st) {
    std::cerr << "cgn-router: " << st.error().message << "\n";
    return 2;
  }
  auto keys = router::load_api_keys(setup->config.router);
  if (!keys) {
    std::cerr << "cgn-router: " << keys.error().message << "\n";
    return 2;
  }
  auto store = router::make_state_store(setup->config, setup->poll_interval);
  if (!store) {
    std::cerr << "cgn-router: " << store.error().message << "\n";
    return 2;
  }

  // Signals are taken synchronously by this thread; block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // The backend's own counters (gossip: cgn_gossip_*) go on the router's /metrics.
  cluster::StateStore* backend = store->get();
  router::Gateway gateway(setup->gateway, std::move(*store), std::move(*keys));
  backend->attach_metrics(gateway.metrics().registry());
  auto port = gateway.start();
  if (!port) {
    std::cerr << "cgn-router: " << port.error().message << "\n";
    return 1;
  }
  if (!setup->port_file.empty()) {
    const std::string tmp = setup->port_file + ".tmp";
    std::ofstream(tmp) << *port << "\n";
    std::filesystem::rename(tmp, setup->port_file, ec);
  }
  auto logger = log::get("router");
  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGHUP) {
      if (setup->config_path.empty()) {
        CGN_LOG_WARN(logger, "SIGHUP ignored: no --config file to reload");
        continue;
      }
      auto cfg = config::load_config(setup->config_path);
      if (!cfg) {
        CGN_LOG_ERROR(logger, "reload failed; keeping the current policy",
                      log::kv("error", cfg.error().message));
        continue;
      }
      gateway.reload(cfg->router);
      continue;
    }
    const auto grace = std::chrono::milliseconds(setup->config.router.timeouts.shutdown_grace_ms);
    CGN_LOG_INFO(logger, "shutting down", log::kv("signal", sig), log::kv("grace_ms", grace.count()));
    gateway.stop(grace);
    return 0;
  }
}
