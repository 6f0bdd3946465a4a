// Fuzz target: the stream assembler on arbitrary bytes an engine might stream (any events, any
// fragment order, any split of the bytes). The first byte picks the feed size. Must never crash or
// grow past its bounds; an answer it assembles is valid JSON whose tool-call arguments are no
// longer than the stream, and the same events always assemble to the same answer.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/http/sse.h"
#include "router/stream_assembler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const size_t step = 1 + data[0] % 64;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  cgn::http::SseParser parser;
  cgn::router::AssemblerLimits limits;
  limits.max_total_bytes = 1 << 16;
  limits.max_choices = 8;
  limits.max_tool_calls = 8;
  cgn::router::StreamAssembler a(limits);
  std::vector<std::string> events;
  for (size_t i = 0; i < text.size(); i += step) {
    if (!parser.feed(text.substr(i, step)).ok()) {
      break;
    }
    cgn::http::SseEvent e;
    while (parser.pop(e)) {
      events.push_back(e.data);
      (void)a.add(e);
    }
  }
  auto body = a.finish();
  cgn::router::StreamAssembler again(limits);
  for (const auto& e : events) {
    (void)again.add(e);
  }
  auto body2 = again.finish();
  if (body.ok() != body2.ok() || (body.ok() && *body != *body2)) {
    __builtin_trap();  // not deterministic
  }
  if (!body.ok()) {
    return 0;
  }
  const nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j["choices"].is_array() ||
      j["choices"].size() > limits.max_choices) {
    __builtin_trap();
  }
  for (const auto& c : j["choices"]) {
    if (!c.contains("message")) {
      continue;
    }
    const auto& calls = c["message"]["tool_calls"];
    if (!calls.is_array() || calls.size() > limits.max_tool_calls) {
      __builtin_trap();
    }
    for (const auto& call : calls) {
      if (call["function"]["arguments"].get<std::string>().size() > text.size()) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
