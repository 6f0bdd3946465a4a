// Fuzz target for the local fast path's frames: any bytes decode to a request or an answer, or
// to an error value, never a crash; what decodes encodes back to the same bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kvcached/fast_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  if (auto r = cgn::kvcached::decode_request(bytes); r.ok()) {
    const auto again = cgn::kvcached::encode(*r);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) {
      std::abort();
    }
  }
  if (auto r = cgn::kvcached::decode_response(bytes); r.ok()) {
    const auto again = cgn::kvcached::encode(*r);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) {
      std::abort();
    }
  }
  return 0;
}
