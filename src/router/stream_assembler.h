// StreamAssembler: the buffered answer an OpenAI-compatible engine would have given, rebuilt from
// the server-sent events of its streamed answer. For the router's steps that stream from a node
// while the client (or the next step) wants one JSON body.
//
// Accepted: chat completions (`chat.completion.chunk` -> `chat.completion`) and completions
// (`text_completion`), with any number of choices (n > 1). Merging follows the official clients'
// stream helpers (openai-node ChatCompletionStream, openai-python accumulate):
//   - text: `delta.content` (chat) / `text` (completions) concatenated in arrival order; content is
//     null when no fragment carried a string (a tool-call-only answer that never sent content);
//   - other string fields of a delta (`reasoning_content`, `reasoning`, `refusal`) concatenated;
//     any other delta field: the last non-null value;
//   - `delta.tool_calls[]` merged by their `index`: `id`, `type`, `function.name` set by the
//     fragments that carry them (the last one wins), `function.arguments` concatenated; emitted
//     in index order; a fragment without an integer index is an error;
//   - `logprobs`: every array of the logprobs object concatenated (chat `content` / `refusal`,
//     completions `tokens` / `token_logprobs` / `top_logprobs` / `text_offset`); null when no
//     chunk carried any;
//   - `finish_reason` and any other choice field (`stop_reason`): the last non-null value;
//   - `id`, `created`, `model`: the first chunk's; `usage`: the last non-null one (the
//     include_usage chunk, or the running usage of continuous_usage_stats); any other top-level
//     field (`system_fingerprint`, `service_tier`): the last non-null value.
// The message always has `tool_calls` (an empty array when none), as vLLM's buffered answer does.
// An `{"error": ...}` event (an engine failing mid-stream) ends assembly with kUpstreamError.
//
// Bounded: the sum of event bytes, the JSON depth of each event, the number of choices and of
// tool calls per choice (AssemblerLimits); going past one is an error, never a truncation.
// Errors are sticky: after one, every add() and finish() returns it.
//
// Not thread-safe: one assembler per stream, used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/http/sse.h"
#include "core/result.h"

namespace cgn::router {

struct AssemblerLimits {
  size_t max_total_bytes = size_t{16} << 20;  // all event data of one stream
  size_t max_json_depth = 64;
  size_t max_choices = 128;
  size_t max_tool_calls = 256;  // per choice
};

enum class AssembleError {
  kMalformedEvent,  // not JSON, not an object, a field of the wrong type
  kWrongObject,     // neither chat.completion.chunk nor text_completion, or the two mixed
  kTooLarge,        // over max_total_bytes or max_json_depth
  kTooManyItems,    // over max_choices or max_tool_calls, or an index out of range
  kUpstreamError,   // the engine sent an error event; the message is its message
  kAfterDone,       // an event after [DONE]
  kIncomplete,      // finish() before any chunk arrived
};
const char* to_string(AssembleError e);

class StreamAssembler {
 public:
  explicit StreamAssembler(AssemblerLimits limits = {}) : limits_(limits) {}

  // One event's data (`[DONE]` ends the stream; events after it are an error).
  Status<AssembleError> add(std::string_view data);
  Status<AssembleError> add(const http::SseEvent& event) { return add(event.data); }
  bool done() const { return done_; }

  // The buffered answer so far (normally called after [DONE]; a stream cut short assembles what
  // arrived). Compact JSON, fields in vLLM's order.
  Result<std::string, AssembleError> finish() const;
  Result<nlohmann::ordered_json, AssembleError> finish_json() const;

 private:
  struct ToolCallState {
    std::optional<std::string> id;
    std::optional<std::string> type;
    std::optional<std::string> name;
    std::string arguments;
  };
  struct ChoiceState {
    std::string role;
    std::optional<std::string> text;     // content (chat) / text (completions)
    nlohmann::ordered_json extra_delta;  // other delta fields, merged
    std::map<int64_t, ToolCallState> tool_calls;
    nlohmann::ordered_json logprobs;       // null or an object of concatenated arrays
    nlohmann::ordered_json finish_reason;  // null until set
    nlohmann::ordered_json extra;          // other choice fields (stop_reason, ...)
  };

  Status<AssembleError> fail(AssembleError e, std::string message);
  Status<AssembleError> add_chunk(nlohmann::ordered_json& chunk);
  Status<AssembleError> add_top(nlohmann::ordered_json& chunk);
  Status<AssembleError> add_choice(nlohmann::ordered_json& choice);
  Status<AssembleError> add_delta(ChoiceState& c, nlohmann::ordered_json& delta);
  Status<AssembleError> add_tool_call(ChoiceState& c, nlohmann::ordered_json& fragment);
  Status<AssembleError> add_logprobs(ChoiceState& c, nlohmann::ordered_json& logprobs);
  nlohmann::ordered_json render_choice(int64_t index, const ChoiceState& c) const;

  AssemblerLimits limits_;
  size_t bytes_ = 0;
  bool done_ = false;
  bool chat_ = true;
  bool seen_chunk_ = false;
  nlohmann::ordered_json head_ = nlohmann::ordered_json::object();   // id, object, created, model
  nlohmann::ordered_json extra_ = nlohmann::ordered_json::object();  // other top-level fields
  nlohmann::ordered_json usage_;                                     // null until a chunk has one
  std::map<int64_t, ChoiceState> choices_;
  std::optional<Error<AssembleError>> failed_;
};

}  // namespace cgn::router
