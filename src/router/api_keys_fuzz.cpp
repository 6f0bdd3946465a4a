// Fuzz target: the API keys file parser and the Authorization header check (outside bytes: an
// operator's file, every client's header). Must never crash, and a parsed key must check.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "router/api_keys.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto keys = cgn::router::ApiKeys::parse(text, "fuzz");
  if (keys.ok()) {
    (void)keys->check_authorization(text);
    (void)keys->check_token(cgn::router::bearer_token(text));
  }
  cgn::router::ApiKeys open;
  if (!open.check_authorization(text)) {
    __builtin_trap();  // no keys configured must always admit
  }
  return 0;
}
