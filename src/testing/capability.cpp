#include "testing/capability.h"

#include <cstdlib>
#include <string>

namespace cgn::testing {

bool skips_allowed() {
  auto set = [](const char* name, const char* want) {
    const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): tests read it before threads start
    return v != nullptr && (want != nullptr ? std::string(v) == want : (*v != '\0' && std::string(v) != "0"));
  };
  return !set("CI", "true") && !set("CGN_NO_SKIP", nullptr);
}

}  // namespace cgn::testing
