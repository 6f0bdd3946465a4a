// Fuzz target: arbitrary bytes, split at a point chosen by the input, through
// the SSE parser with small limits. Every event parsed must survive a
// writer -> parser round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/http/sse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cgn::http;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t split = size == 0 ? 0 : static_cast<size_t>(data[0]) % (size + 1);
  SseLimits lim;
  lim.max_line_bytes = 4096;
  lim.max_event_bytes = 8192;
  lim.max_pending_events = 256;
  SseParser p(lim);
  if (p.feed(in.substr(0, split)).ok()) {
    (void)p.feed(in.substr(split));
  }
  p.finish();
  SseEvent e;
  while (p.pop(e)) {
    SseParser again;
    if (!again.feed(format_sse_event(e)).ok()) {
      std::abort();
    }
    SseEvent back;
    if (!again.pop(back) || back.data != e.data || back.event != e.event || back.id != e.id ||
        back.retry_ms != e.retry_ms) {
      std::abort();
    }
  }
  return 0;
}
