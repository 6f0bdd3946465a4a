// Decoder of the engines' KV events (vLLM's EventBatch; SGLang publishes the same format):
// docs/design/engines.md, "KV events". The ZMQ frames are [topic, seq (8-byte
// big-endian), msgpack(EventBatch)]; this file reads the msgpack. Pure and bounded: every read
// is checked against the end, element counts against the bytes left, nesting by a counter (no
// recursion), so garbage is an error value, never a crash (fuzzed: kv_events_fuzz.cpp).
//
// Accepted shapes:
//   EventBatch   [ts, [events...]] or [ts, [events...], dp_rank|nil] (msgspec array_like),
//                or a map {"ts":..., "events":[...], "data_parallel_rank":...}
//   event, array ["BlockStored", block_hashes, parent|nil, token_ids, block_size, ...]
//                ["BlockRemoved", block_hashes, ...]   ["AllBlocksCleared", ...]
//   event, map   {"type":"BlockStored"|"BlockRemoved"|"AllBlocksCleared", "block_hashes":[...], ...}
// Block hashes may be integers (vLLM's default) or bytes/strings (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0;
// kept as their low 64 bits, as vLLM's own int form is). Unknown event types are counted and
// skipped (newer engines add events); unknown fields are skipped.
//
// The decoder is written here rather than taken from msgpuck (the sim's encoder): msgpuck's
// mp_check keeps its pending-element count in an int that a 32-bit array length overflows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cluster/kv_publish_set.h"
#include "core/result.h"

namespace cgn::agent {

inline constexpr size_t kMaxKvEventBatchBytes = 16 * 1024 * 1024;
inline constexpr size_t kMaxKvEventNesting = 32;

enum class KvDecodeError : uint8_t {
  kTooLarge,   // the payload is over kMaxKvEventBatchBytes
  kTruncated,  // ran past the end
  kBadType,    // a value of the wrong msgpack type where the format fixes one
  kBadShape,   // missing fields, too deep, counts larger than the bytes, trailing bytes
};

std::string_view to_string(KvDecodeError e);

struct KvEvent {
  enum class Kind : uint8_t { kStored, kRemoved, kAllCleared };
  Kind kind = Kind::kStored;
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent;  // stored
  uint32_t block_size = 0;         // stored; 0 when absent
  size_t num_tokens = 0;           // stored
};

struct KvEventBatch {
  double ts = 0;
  std::vector<KvEvent> events;
  std::optional<int64_t> dp_rank;
  size_t unknown_events = 0;  // skipped: types this decoder does not know
};

Result<KvEventBatch, KvDecodeError> decode_kv_event_batch(std::span<const uint8_t> bytes);

// The 8-byte big-endian sequence frame; nullopt when it is not 8 bytes.
std::optional<int64_t> decode_kv_event_seq(std::span<const uint8_t> frame);

// What one batch asks of the published set (cluster::KvWithdrawal).
cluster::KvWithdrawal plan_withdrawal(const KvEventBatch& batch);

}  // namespace cgn::agent
