// Registers `cgn-bench load` (load_cmd_main.cpp) on the cgn-bench command line. Binary-only:
// the library does not link CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace cgn::bench {

// Adds the `load` subcommand to `app`. After parsing, call the returned function: it runs the
// command and returns its exit status when `load` was the subcommand given, else -1.
std::function<int()> add_load_command(CLI::App& app);

}  // namespace cgn::bench
