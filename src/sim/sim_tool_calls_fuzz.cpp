// Fuzz target: tools / tool_choice / response_format bodies and the JSON Schema subset
// (json_schema_gen.h): never a crash; an accepted schema yields JSON; planned calls carry
// arguments that parse.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "sim/json_schema_gen.h"
#include "sim/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cgn::sim;
  using nlohmann::json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return 0;
  }
  if (auto g = generate_json(j); g.ok() && json::parse(*g, nullptr, false).is_discarded()) {
    __builtin_trap();
  }
  if (!j.is_object()) {
    return 0;
  }
  auto s = parse_structured_request(j);
  if (!s.ok()) {
    if (s.error().message.empty()) {
      __builtin_trap();
    }
    return 0;
  }
  const std::vector<ChatMessage> msgs = {{"user", "call get_weather"}};
  for (const ToolCall& c : plan_tool_calls(*s, msgs, "fuzz")) {
    if (c.arguments.find('\n') != std::string::npos ||
        json::parse(c.arguments, nullptr, false).is_discarded()) {
      __builtin_trap();
    }
  }
  if (s->json_reply && json::parse(*s->json_reply, nullptr, false).is_discarded()) {
    __builtin_trap();
  }
  return 0;
}
