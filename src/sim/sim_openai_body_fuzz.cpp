// Fuzz target: chat/completions/embeddings request bodies.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/openai_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cgn::sim;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (ApiKind kind : {ApiKind::kChat, ApiKind::kCompletion}) {
    auto b = parse_generation_body(kind, body);
    if (b.ok()) {
      const Request r = to_engine_request(*b, ReplyMode::kEcho, 4096);
      if (r.max_tokens == 0) {
        __builtin_trap();
      }
    } else if (b.error().message.empty()) {
      __builtin_trap();
    }
  }
  auto e = parse_embeddings_body(body);
  if (e.ok() && e->inputs.empty()) {
    __builtin_trap();
  }
  return 0;
}
