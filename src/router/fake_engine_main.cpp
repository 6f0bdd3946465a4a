// cgn-fake-engine: FakeEngine (fake_engine.h) as a process, for tests that drive cgn-router
// from outside (tests/node/). Not an engine simulator: see cgn-engine-sim for that.
#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "router/fake_engine.h"

// GCC 12 at -O1 with sanitizers reports -Wmismatched-new-delete on Asio coroutine frames (it
// sees awaitable_frame_base's operator delete but not the recycling allocator's operator new):
// a false positive, as in src/sim/server.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

int main(int argc, char** argv) {
  CLI::App app{"cgn-fake-engine: a tiny OpenAI-shaped upstream for router tests"};
  std::string name = "fake";
  std::vector<std::string> models{"test-model"};
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string port_file;
  int tokens = 4;
  app.add_option("--name", name, "name echoed in X-Fake-Engine");
  app.add_option("--model", models, "served model ids");
  app.add_option("--host", host, "listen address");
  app.add_option("--port", port, "listen port (0: any)");
  app.add_option("--port-file", port_file, "write the bound port here");
  app.add_option("--tokens", tokens, "tokens per generation");
  CLI11_PARSE(app, argc, argv);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  cgn::router::testing::FakeEngine engine(name, models, host, port);
  engine.tokens = tokens;
  const uint16_t bound = engine.start();
  if (bound == 0) {
    std::cerr << "cgn-fake-engine: cannot listen\n";
    return 1;
  }
  if (!port_file.empty()) {
    std::ofstream(port_file + ".tmp") << bound << "\n";
    std::error_code ec;
    std::filesystem::rename(port_file + ".tmp", port_file, ec);
  }
  int sig = 0;
  sigwait(&set, &sig);
  engine.stop();
  return 0;
}
