// Fuzz target for the KvCache request decoding: the first byte picks the message (PutBlock first
// and later messages, GetBlock, BatchLookup), the rest goes through ParseFromArray and the
// decoder. Any bytes give a typed request or an error value, never a crash; work is bounded by
// the decoder's limits (requests, digests).
#include <cstddef>
#include <cstdint>

#include "cognitora/v1/kvcached.pb.h"
#include "kvcached/wire.h"

namespace pb = cognitora::v1;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (size_t{1} << 20)) {
    return 0;
  }
  const uint8_t which = data[0] % 4;
  const auto* body = data + 1;
  const int n = static_cast<int>(size - 1);
  switch (which) {
    case 0: {
      pb::PutBlockRequest m;
      if (m.ParseFromArray(body, n)) {
        (void)cgn::kvcached::decode_put_header(m, 64ull << 20);
      }
      break;
    }
    case 1: {
      pb::PutBlockRequest m;
      if (m.ParseFromArray(body, n)) {
        (void)cgn::kvcached::check_put_continuation(m);
      }
      break;
    }
    case 2: {
      pb::GetBlockRequest m;
      if (m.ParseFromArray(body, n)) {
        (void)cgn::kvcached::decode_get(m);
      }
      break;
    }
    default: {
      pb::BatchLookupRequest m;
      if (m.ParseFromArray(body, n)) {
        (void)cgn::kvcached::decode_lookup(m);
      }
      break;
    }
  }
  return 0;
}
