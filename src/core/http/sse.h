// Server-Sent Events: an incremental, bounded parser for event streams that
// arrive in arbitrary pieces (engine output, upstream proxying) and a writer
// that renders one event per call so the server can flush each on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace cgn::http {

enum class SseError {
  line_too_large,   // one line (field) longer than SseLimits::max_line_bytes
  event_too_large,  // one event's data longer than SseLimits::max_event_bytes
  too_many_events,  // more than SseLimits::max_pending_events parsed but not popped
};

const char* to_string(SseError e);

struct SseEvent {
  std::string event;  // "event:" field; empty means the default "message"
  std::string data;   // "data:" lines joined by '\n' (no trailing newline)
  std::string id;     // "id:" field of this event (empty if none)
  std::optional<uint64_t> retry_ms;

  // OpenAI-style end of stream marker: `data: [DONE]`.
  bool is_done() const { return data == "[DONE]"; }
};

struct SseLimits {
  size_t max_line_bytes = 4u << 20;   // a single tool-call delta can be large; never unbounded
  size_t max_event_bytes = 8u << 20;  // accumulated data of one event
  size_t max_pending_events = 4096;   // parsed events waiting for pop()
};

// Incremental SSE parser (WHATWG event-stream rules): lines end in LF, CRLF or
// CR (also split across feeds); lines starting with ':' are comments and are
// ignored; "field: value" strips one space after the colon; several data lines
// join with '\n'; an empty line dispatches the event if it carried any data
// field; a leading UTF-8 BOM is skipped. Bounded by SseLimits; after an error the
// parser stays failed (every later feed returns the same error).
// Not thread-safe: one parser per stream, used by one thread.
class SseParser {
 public:
  explicit SseParser(SseLimits limits = {}) : limits_(limits) {}

  // Consumes bytes; completed events become available through pop().
  Status<SseError> feed(std::string_view bytes);
  // Next completed event, oldest first.
  bool pop(SseEvent& out);
  bool has_event() const { return !events_.empty(); }

  // End of stream. Returns true when a partial line or an undispatched event
  // was pending (it is discarded, as the spec says).
  bool finish();

  uint64_t comments_seen() const { return comments_; }
  uint64_t events_parsed() const { return parsed_; }
  bool failed() const { return failed_.has_value(); }

 private:
  Status<SseError> line(std::string_view l);
  Status<SseError> fail(SseError e, std::string msg);

  SseLimits limits_;
  std::string partial_;   // an incomplete line carried over between feeds
  bool skip_lf_ = false;  // last feed ended on CR: a leading LF belongs to it
  bool bom_checked_ = false;
  bool has_data_ = false;
  SseEvent current_;
  std::deque<SseEvent> events_;
  std::optional<Error<SseError>> failed_;
  uint64_t comments_ = 0;
  uint64_t parsed_ = 0;
};

// Appends one event in wire form: optional "event:"/"id:" lines, one "data: "
// line per line of data (split on LF, CR and CRLF), then the blank line.
void append_sse_event(std::string& out, const SseEvent& e);
// Shorthand for the usual case, an event with only data.
void append_sse_data(std::string& out, std::string_view data);
std::string format_sse_event(const SseEvent& e);
// A comment line (": text\n"): keeps idle streams alive through proxies
// without producing an event. Line breaks in text are replaced by spaces.
void append_sse_comment(std::string& out, std::string_view text);

}  // namespace cgn::http
