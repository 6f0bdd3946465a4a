// cgn-fake-engine's command line (fake_engine_main.cpp): FakeEngine (fake_engine.h) as a
// process, for tests that drive cgn-router from outside (tests/node/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cli_exit.h"

namespace cgn::router::testing {

struct FakeEngineSetup {
  std::string name = "fake";                      // echoed in X-Fake-Engine
  std::vector<std::string> models{"test-model"};  // served model ids
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  std::string port_file;
  int tokens = 4;  // tokens per generation
};

// The setup, or --help (status 0, text for stdout) / a usage error (CLI11's status and message).
CliResult<FakeEngineSetup> parse_fake_engine_options(int argc, const char* const* argv);

}  // namespace cgn::router::testing
