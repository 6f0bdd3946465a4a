// Request bodies → typed requests: the parsing half of the OpenAI surface,
// kept here (pure, bounded, fuzzed) so the HTTP shell only moves bytes.
// Accepts what vLLM accepts for the fields the simulator uses and ignores
// the rest (temperature, top_p, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sim/engine.h"
#include "sim/kv_transfer.h"
#include "sim/logprobs.h"
#include "sim/openai_render.h"
#include "sim/tokenizer.h"
#include "sim/tool_calls.h"

namespace cgn::sim {

enum class BodyError { kInvalidJson, kBadField, kTooLarge };

inline constexpr size_t kMaxBodyBytes = 32 * 1024 * 1024;
inline constexpr size_t kMaxMessages = 4096;
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct GenerationBody {
  ApiKind kind = ApiKind::kChat;
  std::string model;
  std::vector<ChatMessage> messages;      // chat
  std::string prompt_text;                // completions, string prompt
  std::vector<TokenId> prompt_token_ids;  // completions, token-id prompt
  std::optional<uint32_t> max_tokens;     // max_completion_tokens wins over max_tokens
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;
  std::optional<uint64_t> seed;
  std::optional<KvTransferParams> kv_transfer;
  StructuredRequest structured;  // chat: tools, tool_choice, response_format
  LogprobsSpec logprobs;         // chat logprobs/top_logprobs, completions logprobs
};

// Parses a /v1/chat/completions or /v1/completions body. Errors name the field.
Result<GenerationBody, BodyError> parse_generation_body(ApiKind kind, std::string_view body);

// The engine request for a parsed body: chat messages rendered with
// render_chat() and tokenised; echo mode replies with the last user message
// (chat) or the prompt (completions). max_tokens defaults, as in vLLM, to
// what is left of max_model_len.
// A response_format answer is the reply text (echo mode).
Request to_engine_request(const GenerationBody& b, ReplyMode mode, uint32_t max_model_len);

// Makes the engine generate exactly `text` (tool-call arguments, a JSON
// answer): echo mode, stopping after it (ignore_eos off).
void set_fixed_reply(Request& r, std::string text);

struct EmbeddingsBody {
  std::string model;
  std::vector<std::vector<TokenId>> inputs;  // one token list per input
  bool base64 = false;
  uint32_t dimensions = 0;  // 0 = the model's (the shell chooses)
};

Result<EmbeddingsBody, BodyError> parse_embeddings_body(std::string_view body);

}  // namespace cgn::sim
