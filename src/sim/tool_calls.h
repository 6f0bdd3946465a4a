// Tool calls and structured output: what the simulated model answers when a
// chat request carries `tools` / `tool_choice` or `response_format`.
//
// Which tools are called (docs/sim.md, "Tool calls"):
//   tool_choice "none" (or no tools)     text, as without tools
//   {"type":"function","function":{"name":N}}   one call of N
//   "required"                           the tools named in the last user message
//                                        (each once, in `tools` order), else the first tool
//   "auto" (the default with tools)      as "required" when the last message is the
//                                        user's; text after a tool result (last
//                                        message role "tool") or an assistant turn
//   parallel_tool_calls false            at most one call
// Arguments validate against the tool's `parameters` (json_schema_gen.h).
// The engine generates the calls' arguments as its reply (echo mode): the
// arguments of call i are the i-th line of the reply text, so token counts,
// timing and max_tokens apply to them as to any reply.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sim/engine.h"
#include "sim/tokenizer.h"

namespace cgn::sim {

enum class ToolError { kBadField, kUnsupportedSchema };

inline constexpr size_t kMaxTools = 128;

struct ToolDef {
  std::string name;
  std::string arguments;  // generated from the tool's parameters, Python json.dumps style
};

struct ToolCall {
  std::string id;  // "chatcmpl-tool-<16 hex>"
  std::string name;
  std::string arguments;
};

enum class ToolChoice : uint8_t { kAuto, kNone, kRequired, kNamed };

// The request's structured-output part: tools and response_format.
struct StructuredRequest {
  std::vector<ToolDef> tools;
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;  // kNamed: the function
  bool parallel = true;
  std::optional<std::string> json_reply;  // response_format json_object / json_schema: the answer
};

// Reads tools, tool_choice, parallel_tool_calls and response_format from a
// chat body (a JSON object). Errors name the field; an unsupported schema
// keyword is kUnsupportedSchema with vLLM's message.
Result<StructuredRequest, ToolError> parse_structured_request(const nlohmann::json& body);

// The calls the model makes for this request (empty: it answers text).
// Ids derive from request_id and the call's index.
std::vector<ToolCall> plan_tool_calls(const StructuredRequest& s, const std::vector<ChatMessage>& messages,
                                      std::string_view request_id);

// The reply text the engine generates for the calls: each call's arguments
// followed by '\n' (a token never spans two calls).
std::string tool_calls_reply_text(const std::vector<ToolCall>& calls);

}  // namespace cgn::sim
