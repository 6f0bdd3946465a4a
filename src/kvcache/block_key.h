// How a KV block is named in cgn-kvcached. A block's key is derived from the chained prefix
// digest of the tokens up to and including the block (core/digest.h) and from explicit namespace
// fields, never from process state (no random seeds, no per-process hashing): two processes, two
// hosts and two restarts of the daemon derive the same key for the same block.
//
//   KeyDeriver keys(ns);                    // once per namespace: validates and seeds
//   BlockKey k = keys.key(prefix_digest);   // per block: one keyed BLAKE3 of 32 bytes
//
// key = BLAKE3_keyed(seed, prefix digest), seed = BLAKE3_derive_key("cognitora kvcache block key
// v1", TLV encoding of the namespace fields). docs/kvcached.md states the encoding.
//
// Thread-safety: KeyDeriver is immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/digest_types.h"
#include "core/result.h"

namespace cgn::kvcache {

// A block key: 32 bytes, uniformly distributed (DigestHash hashes it).
using BlockKey = Digest;

// Everything besides the tokens that decides whether two engines can share a block's bytes.
struct BlockNamespace {
  std::string model;  // served model name, as the engine loads it
  std::string dtype;  // KV cache dtype ("bf16", "fp8_e4m3", ...)
  uint32_t tp_rank = 0;
  uint32_t tp_size = 1;
  uint32_t block_tokens = 0;  // tokens per block; > 0
  std::string tenant;         // empty: the shared namespace
  bool operator==(const BlockNamespace&) const = default;
};

inline constexpr size_t kMaxNamespaceField = 256;  // bytes, model/dtype/tenant each

enum class KeyError : uint8_t { kInvalid };

// A valid namespace: model and dtype non-empty, every string at most kMaxNamespaceField bytes,
// tp_size >= 1, tp_rank < tp_size, block_tokens > 0. The message names the field.
Status<KeyError> validate(const BlockNamespace& ns);

// The TLV bytes the seed is derived from (for docs and tests).
std::string namespace_material(const BlockNamespace& ns);

class KeyDeriver {
 public:
  // `ns` must be valid (validate()); create() checks.
  static Result<KeyDeriver, KeyError> create(const BlockNamespace& ns);

  BlockKey key(const Digest& prefix) const;
  const Digest& seed() const { return seed_; }

 private:
  explicit KeyDeriver(const Digest& seed) : seed_(seed) {}
  Digest seed_;
};

}  // namespace cgn::kvcache
