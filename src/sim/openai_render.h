// OpenAI-compatible response bodies shaped like vLLM's (testdata/samples/
// vllm-chat-stream*.sse, vllm-chat-completion-tools-cached-tokens.json):
// non-streaming chat/completions bodies, SSE chunks, embeddings. Pure
// functions over the engine's Completion and token events; the HTTP shell
// only writes the bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/engine.h"
#include "sim/flavour.h"
#include "sim/logprobs.h"
#include "sim/tool_calls.h"

namespace cgn::sim {

enum class ApiKind : uint8_t { kChat, kCompletion };

struct ResponseMeta {
  ApiKind kind = ApiKind::kChat;
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;
  std::string model;
  // Chat: the calls the model makes (tool_calls.h). The reply text holds their arguments, one
  // line each; bodies carry them as message.tool_calls / delta.tool_calls fragments and finish
  // with "tool_calls".
  std::vector<ToolCall> tool_calls;
  LogprobsSpec logprobs;  // logprobs.h: per-token entries instead of "logprobs":null
};

// The non-streaming body. kv_transfer_params is null unless the completion
// carries the prefill leg's params.
std::string render_completion_body(const ResponseMeta& meta, const Completion& c);

// The usage object: {"prompt_tokens":..,"total_tokens":..,"completion_tokens":..,
// "prompt_tokens_details":{"cached_tokens":..}}
std::string render_usage(const Usage& u);

// One request's SSE stream, chunk by chunk:
//   on_token() for each kToken event (the first one is preceded by the chat
//   role chunk {"role":"assistant","content":""}; the event marked last
//   carries finish_reason), on_finished() for the kFinished event (the usage
//   chunk with "choices":[] when include_usage, then "data: [DONE]").
// With include_usage every other chunk carries "usage":null, as vLLM does.
class SseStream {
 public:
  SseStream(ResponseMeta meta, bool include_usage) : meta_(std::move(meta)), include_usage_(include_usage) {}

  std::string on_token(const Event& token);
  std::string on_finished(const Completion& c);
  // A failure after the stream started: an error event then [DONE].
  std::string on_error(Flavour f, int status, std::string_view message);
  // Chunks written so far (the fault "drop after N events" counts these).
  uint32_t chunks() const { return chunks_; }

 private:
  void open_chunk(std::string& out) const;
  void close_chunk(std::string& out);
  void choice_chunk(std::string& out, std::string_view delta, std::string_view finish);
  std::string on_tool_token(const Event& token);
  void append_stream_logprobs(std::string& out, std::string_view text);

  ResponseMeta meta_;
  bool include_usage_;
  bool started_ = false;
  bool finished_chunk_sent_ = false;
  uint32_t chunks_ = 0;
  uint32_t token_index_ = 0;  // text tokens rendered so far (logprobs)
  uint32_t text_offset_ = 0;  // completions logprobs text_offset
  size_t tool_index_ = 0;     // the call whose arguments the next token continues
  bool tool_header_sent_ = false;
};

// Modelled timings of a finished request as response headers (milliseconds,
// engine time): X-Sim-Queue-Ms, X-Sim-Ttft-Ms, X-Sim-E2e-Ms, plus
// X-Sim-Cached-Tokens and, on a P/D decode leg, X-Sim-Transferred-Tokens.
std::vector<std::pair<std::string, std::string>> timing_headers(const Completion& c);

// A deterministic unit-length embedding of tokens (same tokens, same vector).
std::vector<float> embedding_vector(std::span<const TokenId> tokens, uint32_t dims);

// POST /v1/embeddings answer; base64 encodes little-endian float32 as OpenAI does.
std::string render_embeddings_body(std::string_view id, int64_t created, std::string_view model,
                                   std::span<const std::vector<float>> vectors, uint32_t prompt_tokens,
                                   bool base64);

}  // namespace cgn::sim
