// Fuzz target: kv_transfer_params JSON (the decode leg's input from a router).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/kv_transfer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = cgn::sim::parse_kv_transfer_params(text);
  if (r.ok()) {
    // What we parse we can render, and the rendering parses back the same.
    auto again = cgn::sim::parse_kv_transfer_params(cgn::sim::render_kv_transfer_params(*r));
    if (!again.ok() || again->remote_block_ids != r->remote_block_ids ||
        again->remote_port != r->remote_port || again->remote_request_id != r->remote_request_id ||
        again->tp_size != r->tp_size) {
      __builtin_trap();
    }
  } else if (r.error().message.empty()) {
    __builtin_trap();
  }
  return 0;
}
