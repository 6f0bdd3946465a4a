// cgn-agent: options (agent/agent_options.h) -> --print-command / --print-record, or AgentApp
// (agent/agent_app.h: the engine under a NodeAgent, the data path, the node record's publisher)
// -> SIGTERM/SIGINT -> stop. docs/agent.md describes the flags and keys.
#include "agent/agent_app.h"
#include "core/log.h"
#include "core/signals.h"

int main(int argc, char** argv) {
  auto setup = cgn::agent::parse_agent_options(argc, argv);
  if (!setup) {
    return cgn::print_cli_exit(setup.error());
  }
  if (auto printed = cgn::agent::agent_print_mode(*setup)) {
    return cgn::print_cli_exit(*printed);
  }
  const cgn::ShutdownSignals signals;  // before any thread starts
  cgn::agent::AgentApp app(std::move(*setup));
  if (auto started = app.start(); !started) {
    return cgn::print_cli_exit(started.error());
  }
  const int sig = signals.wait();
  CGN_LOG_INFO(cgn::log::get("agent"), "stopping", cgn::log::kv("signal", sig));
  app.stop(app.shutdown_deadline());
  return 0;
}
