// cgn-engine-sim's command line: flags, or an engine's own command line, or both -> SimSetup.
// Three ways to start it:
//
//   cgn-engine-sim --flavor vllm --model M --port 0 --port-file F [knobs]
//   cgn-engine-sim [shell flags] -- vllm serve M --port 8000 ...   (any engine line)
//   vllm serve M --port 8000 ...    (argv[0] named like the engine: symlink or wrapper)
//
// Engine lines may carry --sim-port-file F and --sim-log-level L (removed before the line is
// parsed); the NIXL/llama.cpp environment variables are read from the environment as the real
// engines do. Flags given before `--` override what the engine line says.
#pragma once

#include <string>

#include "core/cli_exit.h"
#include "sim/shell/server.h"

namespace cgn::sim {

struct SimSetup {
  ShellConfig shell;      // the engine's options, its fault rules (loaded), embedding width
  std::string port_file;  // --port-file / --sim-port-file: where the bound port is written
  std::string log_level = "info";
};

// Parses argv as main receives it; reads the engines' environment variables and the fault-rules
// file. --help: status 0 and the help text; a bad flag or value: status 2 (CLI11's own status for
// what it rejects) and the message.
CliResult<SimSetup> parse_sim_options(int argc, const char* const* argv);

}  // namespace cgn::sim
