// The digests an engine names its KV blocks by in cgn-kvcached, computed by the agent from a
// request body (docs/agent.md "Tiered KV"): what goes into kv_transfer_params.cgn_prefix_digests
// and what the agent looks up.
//
// - cgn-engine-sim: the simulator's own block hashes (sim/kv_cache.h: its tokenizer and chat
//   template, chained per block of block_tokens tokens), as sim::block_digest() spells them, so
//   the agent finds the blocks the simulator spilled (sim/shell/kvcached_tier.h).
// - every other engine: the routing digests (one per block_bytes of canonical prompt text); the
//   engine's connector saves under the digests it is handed (docs/kv-connector.md).
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/digest_types.h"
#include "kvcache/block_key.h"

namespace cgn::agent {

// The prompt's chain in the engine's block naming; empty when the body is not a generation
// request the engine would take.
using EngineChainFn = std::function<std::vector<Digest>(std::string_view path, std::string_view body)>;

// The simulator's block digests of the prompt of a /v1/completions or /v1/chat/completions body.
std::vector<Digest> sim_block_digests(std::string_view path, std::string_view body, uint32_t block_tokens);

// --block-size N (or =N) in the simulator's extra args; 16 (its default) otherwise.
uint32_t sim_block_size(const std::vector<std::string>& extra_args);

struct EngineNaming {
  kvcache::BlockNamespace ns;  // the namespace the engine writes its blocks in
  EngineChainFn chain;         // the prompt's chain in the engine's naming
};

// For `driver` ("sim": the simulator's namespace: served model, dtype "bf16", tp_size
// [engine] tensor_parallel, block_tokens its block size; otherwise model = served model, dtype
// "auto", tp 1, block_tokens = block_bytes / 4 with the routing digests).
EngineNaming engine_naming(std::string_view driver, const config::EngineConfig& engine, uint32_t block_bytes);

}  // namespace cgn::agent
