// logprobs / top_logprobs in vLLM's shapes (vllm/entrypoints/openai/protocol.py):
//   chat "logprobs":{"content":[{"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}]}]}
//   completions  "logprobs":{"text_offset":[..],"token_logprobs":[..],"tokens":[..],"top_logprobs":[{tok:
//   lp}]}
// The simulated model is sure of each token with a per-request confidence p
// (default 0.9; a rule's `confidence=F` item steers it, faults.h): the
// sampled token's logprob is ln p, the k-th alternative's ln((1 - p) / 2^k)
// (-9999.0, vLLM's value for -inf, when p is 1). Alternatives are other
// generated pieces, deterministic per request. The stop token has no entry.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cgn::sim {

enum class LogprobsError { kBadField };

inline constexpr uint32_t kMaxLogprobs = 20;  // vLLM's default --max-logprobs
inline constexpr double kDefaultConfidence = 0.9;

struct LogprobsSpec {
  bool enabled = false;
  uint32_t top = 0;  // alternatives per token (chat top_logprobs, completions logprobs)
  double confidence = kDefaultConfidence;
  uint64_t seed = 0;  // alternatives' pieces
};

// A stable 64-bit seed from a request id (alternatives, tool-call ids).
uint64_t request_seed(std::string_view request_id);

// Reads chat `logprobs` (bool) + `top_logprobs` (0..20), or completions `logprobs` (0..20).
// Errors are vLLM's messages.
Result<LogprobsSpec, LogprobsError> parse_logprobs(const nlohmann::json& body, bool chat);

// One chat content entry ({"token",...,"top_logprobs":[...]}) for the token at `index`.
void append_chat_logprob(std::string& out, const LogprobsSpec& s, std::string_view token, uint32_t index);

// The whole "logprobs" value of a buffered answer for the reply's tokens.
std::string render_chat_logprobs(const LogprobsSpec& s, const std::vector<std::string_view>& tokens);
std::string render_completion_logprobs(const LogprobsSpec& s, const std::vector<std::string_view>& tokens,
                                       uint32_t first_offset = 0, uint32_t first_index = 0);

// The reply's token texts, as the tokenizer cut them (generated pieces re-tokenise to themselves).
std::vector<std::string_view> reply_tokens(std::string_view text);

}  // namespace cgn::sim
