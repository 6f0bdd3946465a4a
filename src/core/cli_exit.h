// What an options parser returns instead of options when the process should end at once: --help
// (status 0, the text goes to stdout) or a usage error (status != 0, the text goes to stderr).
// Parsers live in library code and return CliResult<Options>; a main prints and exits:
//
//   auto options = parse_x_options(argc, argv);
//   if (!options) return cgn::print_cli_exit(options.error());
#pragma once

#include <iostream>
#include <string>

#include "core/result.h"

namespace cgn {

// Error<int>: code = the exit status, message = the text to print (newline included).
template <class T>
using CliResult = Result<T, int>;

inline Error<int> cli_exit(int status, std::string text) {
  return make_error(status, std::move(text));
}

// Prints the text (stdout for status 0, else stderr) and returns the status.
inline int print_cli_exit(const Error<int>& e) {
  (e.code == 0 ? std::cout : std::cerr) << e.message << std::flush;
  return e.code;
}

}  // namespace cgn
