// OpenAI request parsing and prompt canonicalisation (docs/design/principles.md, prefix digests).
//
// The router parses a request body once, at the edge, into ParsedRequest: the
// few typed fields routing needs plus the canonical prompt bytes that prefix
// digests are computed over (core/digest.h). The body itself is forwarded
// untouched. The exact canonical byte layout is specified, with test
// vectors, in docs/architecture/digests.md:
//
//   chat:  per message  role 0x1F [name 0x1F] [tool_call_id 0x1F] text
//                       {0x1D tool_name 0x1F arguments}* 0x1E
//   completions / embeddings: the (first) prompt string, or token ids as u32 LE.
//   tools: canonical JSON (sorted keys, no whitespace, fixed escaping).
//
// Every function is a pure function of its arguments and thread-safe; the
// parser keeps one reusable simdjson parser per thread (thread_local), which
// keeps its buffers between calls for bodies up to 1 MiB and frees larger
// ones when the call that needed them returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/digest.h"
#include "core/openai_error.h"
#include "core/result.h"

namespace cgn {

// Canonical separators. Control characters that never appear in normal text;
// a prompt that does contain them can at worst alias another prompt's digest,
// which costs a routing hint, never correctness.
inline constexpr char kRecordSep = '\x1e';  // ends a message
inline constexpr char kUnitSep = '\x1f';    // ends role, name, tool_call_id; splits tool name/arguments
inline constexpr char kGroupSep = '\x1d';   // starts a tool call

// Bounds on what a request may contain. Exceeding one is an error, never a
// truncation, so a bound can never silently change a digest.
struct RequestLimits {
  size_t max_body_bytes = size_t{4} * 1024 * 1024;
  size_t max_json_depth = 64;       // nesting of arrays and objects, the top-level object counts as 1
  size_t max_messages = 2048;       // chat messages
  size_t max_content_parts = 1024;  // per message
  size_t max_tool_calls = 256;      // per message
  size_t max_tools = 512;           // entries of `tools`
  size_t max_prompts = 2048;        // entries of a completions `prompt` / embeddings `input` array
  size_t max_prompt_tokens = size_t{1024} * 1024;  // token ids in one prompt
};

enum class Endpoint { kChat, kCompletions, kEmbeddings };
const char* endpoint_name(Endpoint endpoint);

// One tool call of an assistant message, in index order.
struct ToolCall {
  std::string name;
  std::string arguments;  // verbatim JSON text as the model produced it
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // max_completion_tokens, else max_tokens (chat); max_tokens (completions).
  std::optional<int64_t> max_tokens;
  bool has_tools = false;         // a non-empty `tools` array
  size_t message_count = 0;       // chat messages
  size_t prompt_count = 0;        // completions prompts / embeddings inputs (1 for a single one)
  bool prompt_is_tokens = false;  // the canonical prompt is token ids (u32 LE), not text
  std::string canonical_prompt;
  std::string canonical_tools;  // empty when has_tools is false
  // Session affinity key: `prompt_cache_key`, else `user`; empty when neither.
  std::string session_key;
  // The body names `kv_transfer_params` (any value, null included). Only the router may set it,
  // between prefill and decode legs; the gateway refuses a client's.
  bool has_kv_transfer_params = false;
};

enum class RequestError {
  kTooLarge,         // body over max_body_bytes (HTTP 413)
  kMalformedJson,    // not JSON, not UTF-8, trailing garbage
  kTooDeep,          // nesting over max_json_depth
  kWrongType,        // a field has the wrong JSON type
  kMissingField,     // a required field is absent
  kEmptyMessages,    // `messages` is an empty array
  kTooManyMessages,  // over max_messages
  kTooManyItems,     // over another count bound (parts, tool calls, tools, prompts, tokens)
  kInvalidValue,     // right type, unacceptable value (empty model, max_tokens < 1, token id range)
};
const char* request_error_name(RequestError error);

// Parses an OpenAI request body for `endpoint`. Unknown fields are ignored
// (they are forwarded untouched); for duplicate keys the last one wins, as in
// the Python engines behind us. Error messages that concern one field start
// with that field's path in single quotes, e.g. "'messages[2].content' must
// be ...", which to_api_error() turns into the OpenAI `param`.
Result<ParsedRequest, RequestError> parse_openai_request(Endpoint endpoint, std::string_view body,
                                                         const RequestLimits& limits = {});

// The OpenAI-style error for a parse error: 413 for kTooLarge, 400 otherwise,
// with `param` set to the field the message names.
ApiError to_api_error(const Error<RequestError>& error);

// The seed fields of a parsed request; the views point into `request`.
DigestSeedFields digest_seed_fields(const ParsedRequest& request);

// Appends a generated assistant reply to a canonical chat prompt, exactly as
// parse_openai_request serialises the message {"role":"assistant",
// "content":content,"tool_calls":[...]} when the client sends it back in the
// next turn, so that post-generation digests are a prefix of turn N+1's.
void append_assistant_message(std::string& canonical, std::string_view content,
                              const std::vector<ToolCall>& tool_calls);

// The assistant reply of a non-streaming chat completion response (the first
// choice): what append_assistant_message needs.
struct AssistantReply {
  std::string content;
  std::vector<ToolCall> tool_calls;
};
Result<AssistantReply, RequestError> parse_chat_completion_reply(std::string_view response_body,
                                                                 const RequestLimits& limits = {});

// Canonical JSON of any JSON text: no whitespace, object keys sorted by their
// UTF-8 bytes (last duplicate wins), strings escaped as RFC 8785, integers in
// decimal, other numbers as the shortest round-trip form. Exposed for tests,
// the fuzz target and tools; requests use it for `tools`.
Result<std::string, RequestError> canonical_json(std::string_view json, const RequestLimits& limits = {});

}  // namespace cgn
