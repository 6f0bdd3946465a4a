// cgn-agent: flags and configuration -> NodeAgent (engine supervisor + scrape loop) -> wait for
// SIGTERM/SIGINT, then stop the engine gracefully. Publishing the record to a state backend and
// the agent's HTTP/gRPC front are later slices of issue #6.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "agent/agent_grpc.h"
#include "agent/agent_options.h"
#include "agent/gpu_identity.h"
#include "agent/node_agent.h"
#include "core/log.h"
#include "core/version.h"

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
    o.supervisor.host = setup->launch.engine_host;
  }
  auto& base = o.base;
  base.node_id = setup->config.agent.node_id.empty() ? host_name() : setup->config.agent.node_id;
  base.address = setup->config.agent.listen;
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
    std::cout << agent::to_json(base) << "\n";
    return 0;
  }

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto node = agent::NodeAgent::create(**driver, std::move(o));
  if (!node) {
    std::cerr << "cgn-agent: " << node.error().message << "\n";
    return 2;
  }
  // gRPC service Agent (Health), on its own threads; stopped before the node (declared after it).
  agent::NodeAgent* health_node = node->get();
  auto grpc_server = agent::AgentGrpcServer::start(setup->config.agent.grpc_listen, [health_node] {
    return agent::AgentHealth{health_node->record(), health_node->supervisor().state(),
                              health_node->supervisor().starts()};
  });
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
  CGN_LOG_INFO(logger, "starting engine", log::kv("driver", setup->driver),
               log::kv("command", agent::render_command((*node)->command())));
  (*node)->start();
  int sig = 0;
  sigwait(&set, &sig);
  CGN_LOG_INFO(logger, "stopping", log::kv("signal", sig));
  (*node)->stop();
  return 0;
}
