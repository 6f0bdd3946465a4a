// cgn-agent: flags and configuration -> NodeAgent (engine supervisor + scrape loop), the HTTP data
// path in front of the engine (AgentProxy) and the state backend's publisher of the node record
// (and, where the backend carries them, live KV prefixes), found by `state_backend` in the
// backend registry (src/state/backends.h) -> wait for SIGTERM/SIGINT, then stop accepting, leave
// the cluster and stop the engine gracefully.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>

#include "agent/agent_grpc.h"
#include "agent/agent_options.h"
#include "agent/agent_proxy.h"
#include "agent/gpu_identity.h"
#include "agent/kv_event_subscriber.h"
#include "agent/node_agent.h"
#include "core/host_port.h"
#include "core/log.h"
#include "core/version.h"
#include "state/backends.h"

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) {
    return "localhost";
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cgn;
  auto setup = agent::parse_agent_options(argc, argv);
  if (!setup) {
    std::cerr << "cgn-agent: " << setup.error().message << "\n";
    return 2;
  }
  if (setup->help) {
    std::cout << setup->help_text;
    return 0;
  }
  if (auto st = log::configure(setup->config.log.level, setup->log_level, setup->config.log.file); !st) {
    std::cerr << "cgn-agent: " << st.error().message << "\n";
    return 2;
  }
  auto driver = agent::builtin_drivers().find(setup->driver);
  if (!driver) {
    std::cerr << "cgn-agent: " << driver.error().message << "\n";
    return 2;
  }
  const auto& engine = setup->config.engine;
  auto command = (*driver)->launch_command(engine, setup->launch);
  if (!command) {
    std::cerr << "cgn-agent: " << command.error().message << "\n";
    return 2;
  }
  if (setup->print_command) {
    std::cout << agent::render_command(*command) << "\n";
    return 0;
  }

  agent::NodeAgentOptions o;
  o.engine = engine;
  o.launch = setup->launch;
  {
    const auto& t = setup->config.agent;
    o.scrape_interval = std::chrono::milliseconds(t.scrape_interval_ms);
    o.supervisor.probe_interval = std::chrono::milliseconds(t.probe_interval_ms);
    o.supervisor.backoff_initial = std::chrono::milliseconds(t.restart_backoff_initial_ms);
    o.supervisor.backoff_max = std::chrono::milliseconds(t.restart_backoff_max_ms);
    o.supervisor.stop_grace = std::chrono::milliseconds(t.stop_grace_ms);
    o.supervisor.outlive_agent = t.engine_outlives_agent;
    o.supervisor.host = setup->launch.engine_host;
  }
  auto& base = o.base;
  base.node_id = setup->config.agent.node_id.empty() ? host_name() : setup->config.agent.node_id;
  const auto& ac = setup->config.agent;
  auto listen = cgn::split_host_port(ac.listen);
  if (!listen) {
    std::cerr << "cgn-agent: [agent] listen \"" << ac.listen << "\" is not HOST:PORT\n";
    return 2;
  }
  base.address = setup->advertise;
  if (base.address.empty()) {
    const bool wildcard = listen->first == "0.0.0.0" || listen->first == "::" || listen->first.empty();
    base.address = (wildcard ? host_name() : ac.listen.substr(0, ac.listen.rfind(':'))) + ":" +
                   std::to_string(listen->second);
  }
  base.models = {engine.served_name.empty() ? engine.model : engine.served_name};
  base.engine = setup->driver;
  base.role = setup->launch.role;
  base.watt_limit = setup->config.agent.watt_limit;
  base.version = cgn::version();
  base.generation = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
  agent::GpuProbeOptions gp;
  gp.gpus = engine.gpus;
  auto logger = log::get("agent");
  if (auto gpu = agent::probe_gpu_identity(gp)) {
    base.gpu = *gpu;
  } else {
    CGN_LOG_INFO(logger, "no GPU identity", log::kv("reason", gpu.error().message));
  }
  if (setup->print_record) {
    base.kv_epoch = base.generation;
    std::cout << cluster::to_json(base) << "\n";
    return 0;
  }

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  const std::string node_id = base.node_id;
  auto node = agent::NodeAgent::create(**driver, std::move(o));
  if (!node) {
    std::cerr << "cgn-agent: " << node.error().message << "\n";
    return 2;
  }
  // gRPC service Agent (Health), on its own threads; stopped before the node (declared after it).
  agent::NodeAgent* health_node = node->get();
  const auth::ClusterToken cluster_token(setup->config.cluster.tokens);
  auto grpc_server = agent::AgentGrpcServer::start(
      setup->config.agent.grpc_listen,
      [health_node] {
        return cluster::AgentHealth{health_node->record(), health_node->supervisor().state(),
                                    health_node->supervisor().starts()};
      },
      cluster::GrpcSecurity{cluster_token, setup->config.tls});
  const bool grpc_default = setup->config.agent.grpc_listen == config::AgentConfig{}.grpc_listen;
  if (!grpc_server && !grpc_default) {
    std::cerr << "cgn-agent: [agent] grpc_listen: " << grpc_server.error().message << "\n";
    return 2;
  }
  if (!grpc_server) {
    // Only the default address: serve without Health rather than not at all (docs/agent.md).
    CGN_LOG_WARN(logger, "gRPC Agent service not started", log::kv("reason", grpc_server.error().message));
  } else {
    CGN_LOG_INFO(logger, "gRPC Agent service", log::kv("listen", setup->config.agent.grpc_listen),
                 log::kv("port", (*grpc_server)->port()));
  }
  if (grpc_server && !setup->grpc_port_file.empty()) {
    const std::string tmp = setup->grpc_port_file + ".tmp";
    std::ofstream(tmp) << (*grpc_server)->port() << "\n";
    if (std::rename(tmp.c_str(), setup->grpc_port_file.c_str()) != 0) {
      std::cerr << "cgn-agent: cannot write " << setup->grpc_port_file << "\n";
      return 2;
    }
  }
  agent::NodeAgent& na = **node;

  // [agent] state_backend: how the record (and live KV prefixes) reach the routers.
  auto backend = state::builtin_backends().find(ac.state_backend);
  if (!backend) {
    std::cerr << "cgn-agent: [agent] " << backend.error().message << "\n";
    return 2;
  }
  auto made = (*backend)->make_publisher(
      cluster::PublisherParams{setup->config, node_id, [&na] { return na.record(); }});
  if (!made) {
    std::cerr << "cgn-agent: " << made.error().message << "\n";
    return 2;
  }
  std::unique_ptr<cluster::NodePublisher> publisher = std::move(*made);

  agent::AgentProxyOptions px;
  px.host = listen->first;
  px.port = listen->second;
  px.node_id = node_id;
  px.engine = http::Upstream{setup->launch.engine_host, engine.port, false};  // external: [engine] url
  if (ac.engine_metrics) {
    px.engine_metrics_path = (*driver)->metrics_path(setup->launch).value_or("");
  }
  px.block_bytes = setup->config.router.routing.block_bytes;
  px.cluster_token = cluster_token;
  px.tls = setup->config.tls;
  if (!cluster_token.configured() && !setup->config.tls.enabled()) {
    CGN_LOG_WARN(logger,
                 "no cluster credential: /v1/* and the Agent service answer anyone who reaches them "
                 "([cluster] token_file / token_env, or [tls] with client certificates; docs/security.md)",
                 log::kv("listen", ac.listen), log::kv("grpc_listen", ac.grpc_listen));
  }
  agent::PrefixRecorder recorder;
  if (publisher->carries_prefixes()) {
    recorder = [p = publisher.get()](std::span<const Digest> chain) { p->record_prefixes(chain); };
  }
  agent::AgentProxy proxy(
      px,
      [&na] {
        const auto s = na.supervisor().state();
        return agent::EngineHealth{s == cluster::EngineState::kReady, std::string(cluster::to_string(s))};
      },
      recorder);
  publisher->attach_metrics(proxy.registry());
  // [engine] kv_events: the engine's KV events withdraw evicted prefixes (docs/agent.md "KV events").
  std::unique_ptr<agent::KvEventSubscriber> kv_events;
  if (auto sub = agent::kv_events_subscription(**driver, setup->launch); !sub) {
    std::cerr << "cgn-agent: [engine] " << sub.error().message << "\n";
    return 2;
  } else if (sub->has_value()) {
    kv_events = std::make_unique<agent::KvEventSubscriber>(
        **sub, [p = publisher.get()](const cluster::KvWithdrawal& w) { p->withdraw(w); });
    agent::add_kv_event_metrics(proxy.registry(), *kv_events, publisher.get());
    if (auto st = kv_events->start(); !st) {
      std::cerr << "cgn-agent: [engine] kv_events: " << st.error().message << "\n";
      return 2;
    }
  }
  auto port = proxy.start();
  if (!port) {
    std::cerr << "cgn-agent: cannot serve on " << ac.listen << ": " << port.error().message << "\n";
    return 2;
  }
  CGN_LOG_INFO(logger, "serving", log::kv("listen", px.host + ":" + std::to_string(*port)),
               log::kv("advertise", na.record().address), log::kv("state_backend", ac.state_backend));
  CGN_LOG_INFO(logger, "starting engine", log::kv("driver", setup->driver),
               log::kv("command", agent::render_command(na.command())));
  na.start();
  if (auto st = publisher->start(); !st) {
    std::cerr << "cgn-agent: " << st.error().message << "\n";
    proxy.stop(std::chrono::milliseconds(0));
    na.stop();
    return 2;
  }
  CGN_LOG_INFO(logger, "publishing", log::kv("how", publisher->describe()));
  int sig = 0;
  sigwait(&set, &sig);
  CGN_LOG_INFO(logger, "stopping", log::kv("signal", sig));
  proxy.stop(std::chrono::milliseconds(setup->config.router.timeouts.shutdown_grace_ms));
  publisher->stop();  // leave the cluster at once (etcd: revoke the lease, not wait for the TTL)
  na.stop();
  return 0;
}
