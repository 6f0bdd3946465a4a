// cgn-agent: options (agent/agent_options.h) -> --print-command / --print-record, or AgentApp
// (agent/agent_app.h: the engine under a NodeAgent, the data path, the node record's publisher)
// -> SIGTERM/SIGINT -> stop; SIGHUP -> reload ([agent] watt_limit). docs/agent.md describes the flags and
// keys.
#include "agent/agent_app.h"
#include "core/log.h"
#include "core/sd_notify.h"
#include "core/signals.h"
#include "core/version.h"

namespace {
// SIGHUP: the reload, framed for systemd (Type=notify) as RELOADING=1 ... READY=1.
void reload(cgn::agent::AgentApp& app) {
  cgn::sd::notify_reloading("agent");
  (void)app.reload();
  cgn::sd::notify_ready("agent");
}
}  // namespace

int main(int argc, char** argv) {
  if (auto v = cgn::print_version_if_asked(argc, argv, "cgn-agent")) {
    return *v;
  }
  auto setup = cgn::agent::parse_agent_options(argc, argv);
  if (!setup) {
    return cgn::print_cli_exit(setup.error());
  }
  if (auto printed = cgn::agent::agent_print_mode(*setup)) {
    return cgn::print_cli_exit(*printed);
  }
  const cgn::ShutdownSignals signals;  // before any thread starts
  cgn::HangupSignal hangup;            // SIGHUP: reload watt_limit; likewise before any thread
  cgn::agent::AgentApp app(std::move(*setup));
  if (auto started = app.start(); !started) {
    return cgn::print_cli_exit(started.error());
  }
  if (auto why = hangup.start([&app] { reload(app); })) {
    return cgn::print_cli_exit(cgn::cli_exit(2, "cgn-agent: " + *why + "\n"));
  }
  cgn::sd::notify_ready("agent");
  const int sig = signals.wait();
  cgn::sd::notify_stopping("agent");
  hangup.stop();
  CGN_LOG_INFO(cgn::log::get("agent"), "stopping", cgn::log::kv("signal", sig));
  app.stop(app.shutdown_deadline());
  return 0;
}
