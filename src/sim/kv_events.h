// vLLM-compatible KV events (docs/design/engines.md, "KV events"): the parsed
// --kv-events-config and the msgpack encoding of one EventBatch. Pure; the ZMQ side is
// kv_event_publisher.h.
//
//   --kv-events-config '{"enable_kv_cache_events":true,"publisher":"zmq",
//                        "endpoint":"tcp://*:5557","topic":"kv-events","replay_endpoint":"tcp://*:5558"}'
//
// Wire: ZMQ PUB frames [topic, seq (8-byte big-endian), msgpack(EventBatch)]. EventBatch is the
// array [ts (float64 seconds), [events...], data_parallel_rank (0)]. Events, with integer block
// hashes (vLLM's VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1 default):
//   array encoding (legacy msgspec array_like, tagged by class name):
//     ["BlockStored", [hashes], parent|nil, [token_ids], block_size, lora_id nil, "GPU", lora_name nil]
//     ["BlockRemoved", [hashes], "GPU"]
//     ["AllBlocksCleared"]
//   map encoding (newer vLLM): the same fields as a map with a "type" key, e.g.
//     {"type":"BlockRemoved","block_hashes":[...],"medium":"GPU"}
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/result.h"
#include "sim/kv_cache.h"

namespace cgn::sim {

enum class KvEventEncoding : uint8_t { kArray, kMap };

struct KvEventsConfig {
  bool enabled = false;  // enable_kv_cache_events (and publisher "zmq")
  std::string publisher = "zmq";
  std::string endpoint = "tcp://*:5557";
  std::string topic;               // vLLM's default is ""
  std::string replay_endpoint;     // "" = no replay socket
  uint32_t buffer_steps = 10'000;  // batches kept for replay
  int hwm = 100'000;               // PUB send high-water mark
  KvEventEncoding encoding = KvEventEncoding::kArray;
};

enum class KvEventsConfigError : uint8_t { kBadJson, kBadField };

// Parses the JSON of --kv-events-config. Unknown keys are ignored (vLLM has more: max_queue_size,
// ...). enabled_by_default: SGLang has no enable key (the flag enables), vLLM needs it.
Result<KvEventsConfig, KvEventsConfigError> parse_kv_events_config(std::string_view json_text,
                                                                   bool enabled_by_default);

// vLLM's rule: the PUB socket binds when the endpoint contains "*", "::", "ipc://" or "inproc://";
// otherwise it connects.
bool kv_endpoint_binds(std::string_view endpoint);

// msgpack(EventBatch) for the given events.
std::string encode_event_batch(double ts, std::span<const KvCacheEvent> events, KvEventEncoding enc);

// The 8-byte big-endian sequence frame (END_SEQ -1 ends a replay).
std::string encode_seq(int64_t seq);

}  // namespace cgn::sim
