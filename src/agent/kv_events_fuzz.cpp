// Fuzz target for the KV event decoder (msgpack EventBatch from the engine's ZMQ socket): any
// bytes give a batch or an error value, never a crash; a decoded batch plans a withdrawal.
#include <cstddef>
#include <cstdint>
#include <span>

#include "agent/kv_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)cgn::agent::decode_kv_event_seq(bytes.first(size < 8 ? size : 8));
  auto b = cgn::agent::decode_kv_event_batch(bytes);
  if (b.ok()) {
    (void)cgn::agent::plan_withdrawal(*b);
  }
  return 0;
}
