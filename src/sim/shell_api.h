// Bodies of the simulator shell's own endpoints (not OpenAI): the P/D side
// channel (POST /internal/kv/claim) and KV admin (POST /admin/evict). Pure,
// bounded parsers, fuzzed (sim_shell_api_fuzz.cpp), so the HTTP shell only
// moves bytes.
//
//   claim request:  {"engine_id":"sim-vllm-8100","request_id":"r1","block_ids":[3,4,5]}
//   claim answer:   {"status":"ok"|"expired"|"unknown"|"mismatch"}
//   evict request:  {"all":true} | {"prompt":"..."} | {"messages":[...]} (chat, rendered
//                   and tokenised exactly as /v1/chat/completions would)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sim/engine.h"
#include "sim/openai_parse.h"

namespace cgn::sim {

inline constexpr size_t kMaxShellBodyBytes = 4 * 1024 * 1024;
inline constexpr size_t kMaxClaimIdBytes = 512;

struct ClaimRequest {
  std::string engine_id;  // the prefill instance the decode side believes it talks to
  std::string request_id;
  std::vector<int64_t> block_ids;
};

Result<ClaimRequest, BodyError> parse_claim_body(std::string_view body);
std::string render_claim_body(const ClaimRequest& c);
std::string render_claim_answer(ClaimStatus s);
// What the prefill side answered; anything unreadable counts as kUnknown
// (the decode side then recomputes, as vLLM does on a failed load).
ClaimStatus parse_claim_answer(std::string_view body);

struct EvictRequest {
  bool all = false;
  std::vector<TokenId> prefix;  // when !all: the prompt whose cached chain to drop
};

Result<EvictRequest, BodyError> parse_evict_body(std::string_view body);

}  // namespace cgn::sim
