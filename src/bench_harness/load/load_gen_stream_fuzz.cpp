// Fuzz target for what `cgn-bench load` does with a streamed reply: arbitrary bytes through the
// SSE framing (core/http/sse.h, as the HTTP client's next_event() does) and every event's data
// through parse_stream_chunk, then the raw input as one data payload. Whatever the router or an
// engine sends, the parser answers a chunk or an error value; it never throws or crashes, and a
// chunk it accepts is self-consistent.
// Corpus: tests/fuzz/corpus/load_gen_stream/ (real vLLM, SGLang and router chunks plus malformed
// edge cases).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bench_harness/load/load_gen.h"
#include "core/http/sse.h"

namespace {

void check(std::string_view data) {
  auto c = cgn::bench::parse_stream_chunk(data);
  if (!c) {
    if (c.error().message.empty()) {
      std::abort();  // an error must say what was wrong
    }
    return;
  }
  // An error chunk carries nothing else; a chunk without usage reports no token counts.
  if (c->error && (c->has_usage || c->text_pieces != 0)) {
    std::abort();
  }
  if (!c->has_usage && (c->prompt_tokens != 0 || c->completion_tokens != 0 || c->has_cached)) {
    std::abort();
  }
  if (!c->has_cached && c->cached_tokens != 0) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  cgn::http::SseLimits lim;
  lim.max_line_bytes = 16384;
  lim.max_event_bytes = 32768;
  lim.max_pending_events = 256;
  cgn::http::SseParser p(lim);
  (void)p.feed(in);
  p.finish();
  cgn::http::SseEvent e;
  while (p.pop(e)) {
    if (!e.is_done()) {
      check(e.data);
    }
  }
  check(in);
  return 0;
}
