// Fuzz target for the agent's HTTP response parser (bytes from the engine's port).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/loopback_get.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = cgn::agent::parse_http_response(std::string_view(reinterpret_cast<const char*>(data), size), 4096);
  if (r.ok() && r->body.size() > 4096) {
    __builtin_trap();
  }
  return 0;
}
