#include "router/fake_engine_options.h"

#include <CLI/CLI.hpp>
#include <sstream>

namespace cgn::router::testing {

CliResult<FakeEngineSetup> parse_fake_engine_options(int argc, const char* const* argv) {
  FakeEngineSetup s;
  CLI::App app{"cgn-fake-engine: a tiny OpenAI-shaped upstream for router tests"};
  // Help shows the defaults: a test reading it knows what it gets without the flag.
  app.add_option("--name", s.name, "name echoed in X-Fake-Engine")->capture_default_str();
  app.add_option("--model", s.models, "served model ids")->capture_default_str();
  app.add_option("--host", s.host, "listen address")->capture_default_str();
  app.add_option("--port", s.port, "listen port (0: any)")->capture_default_str();
  app.add_option("--port-file", s.port_file, "write the bound port here");
  app.add_option("--tokens", s.tokens, "tokens per generation")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out;
    std::ostringstream err;
    const int status = app.exit(e, out, err);
    return cli_exit(status, status == 0 ? out.str() : err.str());
  }
  return s;
}

}  // namespace cgn::router::testing
