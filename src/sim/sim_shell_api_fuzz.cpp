// Fuzz target: the shell's own request bodies (P/D claim, KV evict) and the
// claim answer the decode side reads back from a prefill instance.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/shell_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = cgn::sim::parse_claim_body(text);
  if (c.ok()) {
    // What we parse we can render, and the rendering parses back the same.
    auto again = cgn::sim::parse_claim_body(cgn::sim::render_claim_body(*c));
    if (!again.ok() || again->block_ids != c->block_ids || again->request_id != c->request_id ||
        again->engine_id != c->engine_id) {
      __builtin_trap();
    }
  } else if (c.error().message.empty()) {
    __builtin_trap();
  }
  auto e = cgn::sim::parse_evict_body(text);
  if (e.ok() ? (!e->all && e->prefix.empty()) : e.error().message.empty()) {
    __builtin_trap();
  }
  const auto st = cgn::sim::parse_claim_answer(text);
  if (cgn::sim::parse_claim_answer(cgn::sim::render_claim_answer(st)) != st) {
    __builtin_trap();
  }
  return 0;
}
