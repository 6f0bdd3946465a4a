#include "core/version.h"

#include <cstdio>
#include <cstring>

namespace cgn {

const char* version() {
  return CGN_VERSION;
}

std::optional<int> print_version_if_asked(int argc, const char* const* argv, const char* program) {
  if (argc != 2 || std::strcmp(argv[1], "--version") != 0) {
    return std::nullopt;
  }
  std::printf("%s %s\n", program, version());
  return 0;
}

}  // namespace cgn
