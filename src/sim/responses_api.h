// POST /v1/responses as vLLM serves it without Harmony (vllm/entrypoints/openai/serving_responses.py
// and protocol.py at commit 00b6063f3bf6, docs/sim.md "Responses API"): the request body parsed into
// the chat conversation it stands for, the per-engine store that previous_response_id reads, and
// the buffered response object and streamed events. Pure and bounded; the HTTP shell only moves
// the bytes and drives the engine.
//
//   - The conversation, as vLLM's _construct_input_messages: `instructions` as a system message,
//     then the stored conversation of previous_response_id (its messages and its output text as
//     an assistant message), then `input` (a string is one user message). A second turn is the
//     first turn's prompt plus its reply plus the new input, so it reuses the first turn's KV.
//   - `tools` (non-empty) are refused with vLLM's 400 ("Tool use is not supported in Responses API
//     without Harmony"); function_call / function_call_output input items likewise.
//   - Stored responses (`store`, default true) are kept in a ResponseStore bounded in entries and
//     bytes, the oldest evicted first; an unknown previous_response_id gets vLLM's 404.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "sim/engine.h"
#include "sim/openai_parse.h"
#include "sim/tokenizer.h"

namespace cgn::sim {

struct ResponsesBody {
  std::string model;
  std::optional<std::string> instructions;
  std::vector<ChatMessage> input;    // `input` as chat messages
  std::string previous_response_id;  // empty: none
  bool store = true;
  bool stream = false;
  bool has_tools = false;  // a non-empty `tools`: the shell answers vLLM's 400
  std::optional<uint32_t> max_output_tokens;
  std::optional<uint64_t> seed;
  double temperature = 1.0;  // echoed in the response object
  double top_p = 1.0;
};

// Errors name the field ("'input[2].content' must be a string or an array of parts").
Result<ResponsesBody, BodyError> parse_responses_body(std::string_view body);

// vLLM's answer to a request with tools (a 400 BadRequestError).
inline constexpr std::string_view kResponsesToolsError =
    "Tool use is not supported in Responses API without Harmony None";

// What a stored response keeps for a follow-up: the conversation it was made from and its text.
struct StoredResponse {
  std::vector<ChatMessage> messages;
  std::string output_text;
};

// response id -> StoredResponse, bounded in entries and in bytes (message and output text bytes);
// put() evicts the oldest entries first. vLLM's dict grows without bound; a simulator that runs for
// days must not.
class ResponseStore {
 public:
  static constexpr size_t kDefaultMaxEntries = 4096;
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

  explicit ResponseStore(size_t max_entries = kDefaultMaxEntries, size_t max_bytes = kDefaultMaxBytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // A response larger than max_bytes on its own is not kept.
  void put(std::string id, StoredResponse r);
  const StoredResponse* find(std::string_view id) const;
  size_t size() const { return order_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::string id;
    StoredResponse value;
    size_t bytes = 0;
  };
  size_t max_entries_;
  size_t max_bytes_;
  size_t bytes_ = 0;
  std::list<Entry> order_;  // oldest first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> by_id_;
};

// The conversation a request stands for (vLLM's _construct_input_messages); `previous` is the
// stored response of previous_response_id, or null.
std::vector<ChatMessage> responses_conversation(const ResponsesBody& b, const StoredResponse* previous);

// vLLM's 404 for an unknown previous_response_id: "Response with id '<id>' not found."
std::string response_not_found_message(std::string_view id);

// An id like vLLM's random_uuid(): 32 lowercase hex digits, from a per-process salt and a counter.
std::string hex_id(uint64_t salt, uint64_t n);

// The fields of a response object besides its output and usage.
struct ResponseObjectMeta {
  std::string id;          // "resp_..."
  std::string message_id;  // "msg_..." (the buffered output message)
  int64_t created_at = 0;
  std::string model;
  std::optional<std::string> instructions;
  std::string previous_response_id;
  uint32_t max_output_tokens = 0;  // the effective limit
  double temperature = 1.0;
  double top_p = 1.0;
};

// The response object: status "completed" with the output message (none when the text is empty,
// as vLLM) and usage, or (c == nullptr) status "in_progress" with no output and usage null.
std::string render_response_object(const ResponseObjectMeta& m, const Completion* c);

// One request's event stream (vLLM's _process_simple_streaming_events): response.created and
// response.in_progress with the first token, then response.output_item.added and
// response.content_part.added, one response.output_text.delta per token, and at the end
// response.output_text.done, response.content_part.done, response.output_item.done and
// response.completed. sequence_number counts every event from 0; content_index advances after each
// event as vLLM's does. Each event is "event: <type>\ndata: <json>\n\n"; no [DONE].
class ResponsesSse {
 public:
  // `on_complete` runs once with the finished request (the shell stores the response there).
  ResponsesSse(ResponseObjectMeta meta, std::string item_id,
               std::function<void(const Completion&)> on_complete)
      : meta_(std::move(meta)), item_id_(std::move(item_id)), on_complete_(std::move(on_complete)) {}

  std::string on_token(const Event& token);
  std::string on_finished(const Completion& c);
  // A failure after the stream started: vLLM's error event.
  std::string on_error(Flavour f, int status, std::string_view message);
  uint32_t chunks() const { return sequence_; }  // events written so far

 private:
  void emit(std::string& out, std::string_view type, nlohmann::ordered_json fields);

  ResponseObjectMeta meta_;
  std::string item_id_;
  std::function<void(const Completion&)> on_complete_;
  uint32_t sequence_ = 0;
  uint32_t content_index_ = 0;
  bool started_ = false;
  bool item_open_ = false;
  std::string text_;
};

}  // namespace cgn::sim
