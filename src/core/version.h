#pragma once

#include <optional>

namespace cgn {

// The project version, e.g. "0.1.0" (from CMake's project()).
const char* version();

// `PROGRAM --version` (its only argument): prints "PROGRAM VERSION" on stdout and returns 0 for
// main to return; anything else: nullopt. The first line of every daemon's main, so a packaged
// binary can be asked what it is before any configuration is read.
std::optional<int> print_version_if_asked(int argc, const char* const* argv, const char* program);

}  // namespace cgn
