// Fuzz target: launch-line parsing. Input: argv words separated by '\n'.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/launch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> argv;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      argv.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  argv.push_back(std::move(cur));
  auto r = cgn::sim::parse_launch_line(argv);
  if (r.ok()) {
    // Invariants of a successful parse.
    if (r->model.empty() || r->served_model_name.empty() || r->port == 0 || r->engine.engine_id.empty()) {
      __builtin_trap();
    }
  } else if (r.error().message.empty()) {
    __builtin_trap();
  }
  return 0;
}
