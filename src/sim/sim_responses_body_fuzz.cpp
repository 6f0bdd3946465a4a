// Fuzz target: /v1/responses request bodies, the conversation they stand for and its prompt.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/responses_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cgn::sim;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto b = parse_responses_body(body);
  if (!b.ok()) {
    if (b.error().message.empty()) {
      __builtin_trap();
    }
    return 0;
  }
  const StoredResponse previous{{{"user", "earlier"}}, "reply"};
  const auto conversation = responses_conversation(*b, b->previous_response_id.empty() ? nullptr : &previous);
  if (conversation.size() < b->input.size()) {
    __builtin_trap();
  }
  GenerationBody chat;
  chat.messages = conversation;
  chat.max_tokens = b->max_output_tokens;
  const Request r = to_engine_request(chat, ReplyMode::kEcho, 4096);
  if (r.max_tokens == 0) {
    __builtin_trap();
  }
  return 0;
}
