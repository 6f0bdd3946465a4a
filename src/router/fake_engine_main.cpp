// cgn-fake-engine: FakeEngine (fake_engine.h) as a process, for tests that drive cgn-router
// from outside (tests/node/). Not an engine simulator: see cgn-engine-sim for that.
#include <iostream>

#include "core/atomic_file.h"
#include "core/signals.h"
#include "router/coro_warnings.h"
#include "router/fake_engine.h"
#include "router/fake_engine_options.h"
#include "router/router_app.h"

int main(int argc, char** argv) {
  auto setup = cgn::router::testing::parse_fake_engine_options(argc, argv);
  if (!setup) {
    return cgn::print_cli_exit(setup.error());
  }
  const cgn::ShutdownSignals signals;  // before any thread starts
  cgn::router::testing::FakeEngine engine(setup->name, setup->models, setup->host, setup->port);
  engine.tokens = setup->tokens;
  if (engine.start() == 0) {
    std::cerr << "cgn-fake-engine: cannot listen\n";
    return 1;
  }
  if (!setup->port_file.empty()) {
    if (auto w = cgn::write_port_file(setup->port_file, engine.port()); !w) {
      std::cerr << "cgn-fake-engine: --port-file: " << w.error().message << "\n";
      return 2;
    }
  }
  signals.wait();
  engine.stop();
  return 0;
}
