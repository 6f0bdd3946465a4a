// cgn-fake-carbon: FakeCarbonServer (fake_provider.h) as a process, for scripts/bench-carbon.sh.
// Writes its port to --port-file; runs until SIGTERM/SIGINT.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "core/atomic_file.h"
#include "router/carbon/fake_provider.h"

namespace {

int serve(const cgn::router::carbon::FakeCarbonOptions& o, const std::string& port_file) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before the server's threads start
  cgn::router::carbon::FakeCarbonServer server(o);
  auto port = server.start();
  if (!port) {
    std::fprintf(stderr, "cgn-fake-carbon: cannot listen: %s\n", port.error().message.c_str());
    return 1;
  }
  if (!port_file.empty()) {
    if (auto st = cgn::write_port_file(port_file, *port); !st) {
      std::fprintf(stderr, "cgn-fake-carbon: --port-file: %s\n", st.error().message.c_str());
      return 2;
    }
  }
  int sig = 0;
  sigwait(&set, &sig);
  server.stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cgn::router::carbon::FakeCarbonOptions o;
  std::string port_file;
  CLI::App app{"cgn-fake-carbon: Electricity Maps v3 / WattTime v3 on loopback (tests and demos)"};
  app.add_option("--port", o.port, "listen port (0: any)");
  app.add_option("--port-file", port_file, "write the bound port here");
  app.add_option("--gco2", o.gco2_per_kwh, "initial intensity, gCO2/kWh");
  app.add_option("--em-token", o.em_token, "the Electricity Maps auth-token it accepts");
  CLI11_PARSE(app, argc, argv);
  return serve(o, port_file);
}
