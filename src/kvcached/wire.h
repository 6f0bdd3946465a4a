// The gRPC edge of cgn-kvcached: every KvCache request message decoded into typed structs by
// pure functions before the store is touched, and the store's answers encoded back. Bounds: a
// BatchLookup carries at most kMaxLookupRequests requests and kMaxLookupDigests digests in all;
// blocks travel in chunks of kChunkBytes, so no message is larger than kMaxMessageBytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/digest_types.h"
#include "core/result.h"
#include "kvcache/block_key.h"
#include "kvcache/store_types.h"

namespace cognitora::v1 {
class BlockNamespace;
class PutBlockRequest;
class GetBlockRequest;
class BatchLookupRequest;
class BatchLookupResponse;
class StatsResponse;
}  // namespace cognitora::v1

namespace cgn::kvcached {

inline constexpr size_t kChunkBytes = size_t{1} << 20;
inline constexpr size_t kMaxMessageBytes = kChunkBytes + (size_t{64} << 10);
inline constexpr size_t kMaxLookupRequests = 1024;
inline constexpr size_t kMaxLookupDigests = 16384;  // 34 bytes each on the wire: fits a message

// Every decoding error is a client error (gRPC INVALID_ARGUMENT); the message names the field.
enum class WireError : uint8_t { kInvalid };

struct PutHeader {
  kvcache::BlockNamespace ns;
  Digest digest{};
  uint64_t length = 0;
};

struct GetRequest {
  kvcache::BlockNamespace ns;
  Digest digest{};
};

struct LookupRequest {
  kvcache::BlockNamespace ns;
  std::vector<std::vector<Digest>> requests;
  uint32_t lease_ms = 0;
};

// A valid namespace (kvcache::validate).
Result<kvcache::BlockNamespace, WireError> decode_namespace(const cognitora::v1::BlockNamespace& m);
// Exactly 32 bytes.
Result<Digest, WireError> decode_digest(std::string_view bytes, std::string_view field);

// The first message of a PutBlock stream: namespace, digest, 0 < length <= max_block_bytes, and
// no more data than length.
Result<PutHeader, WireError> decode_put_header(const cognitora::v1::PutBlockRequest& m,
                                               uint64_t max_block_bytes);
// A later message: data only (a header field again is an error).
Status<WireError> check_put_continuation(const cognitora::v1::PutBlockRequest& m);
Result<GetRequest, WireError> decode_get(const cognitora::v1::GetBlockRequest& m);
Result<LookupRequest, WireError> decode_lookup(const cognitora::v1::BatchLookupRequest& m);

// "ram" | "ssd" (kvcache::to_string) and back; kNone for anything else.
kvcache::Tier parse_tier(std::string_view s);

void encode_stats(const kvcache::StoreStats& s, cognitora::v1::StatsResponse& out);
kvcache::StoreStats decode_stats(const cognitora::v1::StatsResponse& m);

void set_namespace(const kvcache::BlockNamespace& ns, cognitora::v1::BlockNamespace& out);

}  // namespace cgn::kvcached
