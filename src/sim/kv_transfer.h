// kv_transfer_params: the vLLM NixlConnector handoff between a prefill and a
// decode instance (docs/design/principles.md, disaggregation, docs/design/engines.md).
//
// Request side (the router's prefill leg):
//   {"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,
//    "remote_block_ids":null,"remote_host":null,"remote_port":null}
// Prefill answer, copied into the decode leg:
//   {"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[..ints..],
//    "remote_engine_id":"..","remote_request_id":"..","remote_host":"..",
//    "remote_port":N,"tp_size":1}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cgn::sim {

enum class KvParamsError { kNotJson, kNotObject, kBadField, kTooLarge };

struct KvTransferParams {
  bool do_remote_decode = false;
  bool do_remote_prefill = false;
  std::optional<std::vector<int64_t>> remote_block_ids;
  std::optional<std::string> remote_engine_id;
  std::optional<std::string> remote_request_id;
  std::optional<std::string> remote_host;
  std::optional<int> remote_port;
  int tp_size = 1;

  // The decode side needs all five to pull (vLLM logs "Got invalid
  // KVTransferParams" and skips the transfer otherwise).
  bool complete_for_pull() const {
    return remote_block_ids.has_value() && remote_engine_id.has_value() && remote_request_id.has_value() &&
           remote_host.has_value() && remote_port.has_value();
  }
};

inline constexpr size_t kMaxRemoteBlockIds = 1 << 16;
inline constexpr size_t kMaxKvParamsBytes = 1 << 20;

// Parses the JSON text of a kv_transfer_params object. Unknown keys are
// ignored (vLLM passes the dict through); known keys must have the right type
// or be null. Bounded: at most kMaxKvParamsBytes of text and
// kMaxRemoteBlockIds block ids.
Result<KvTransferParams, KvParamsError> parse_kv_transfer_params(std::string_view json_text);

// Renders a prefill answer's params with vLLM's key order.
std::string render_kv_transfer_params(const KvTransferParams& p);

}  // namespace cgn::sim
