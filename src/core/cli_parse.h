// CLI11 parsing as a CliResult (core/cli_exit.h): --help and usage errors become the status and
// text CLI11 would have printed, so options parsers stay free of printing and exiting. For
// library code that links CLI11::CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <sstream>
#include <utility>

#include "core/cli_exit.h"

namespace cgn {

// app.parse(args...): Ok, or the exit status with CLI11's text (help on stdout's side, errors on
// stderr's side of print_cli_exit()).
template <class... Args>
CliResult<Ok> parse_command_line(CLI::App& app, Args&&... args) {
  try {
    app.parse(std::forward<Args>(args)...);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out;
    std::ostringstream err;
    const int status = app.exit(e, out, err);
    return cli_exit(status, status == 0 ? out.str() : err.str());
  }
  return Ok{};
}

}  // namespace cgn
