#include "core/http/sse.h"

#include <charconv>
#include <cstring>
#include <utility>

namespace cgn::http {

const char* to_string(SseError e) {
  switch (e) {
    case SseError::line_too_large:
      return "line_too_large";
    case SseError::event_too_large:
      return "event_too_large";
    case SseError::too_many_events:
      return "too_many_events";
  }
  return "unknown";
}

namespace {

// First CR or LF at or after `from`, npos if none. Two vectorised memchr passes
// instead of find_first_of, which tests every byte against the set: engines
// send LF-only streams, so the CR pass is bounded by the line.
size_t find_line_end(std::string_view s, size_t from) {
  const char* base = s.data();
  const char* end = base + s.size();
  const char* lf = static_cast<const char*>(std::memchr(base + from, '\n', s.size() - from));
  const char* limit = lf ? lf : end;
  const char* cr =
      static_cast<const char*>(std::memchr(base + from, '\r', static_cast<size_t>(limit - (base + from))));
  const char* hit = cr ? cr : lf;
  return hit ? static_cast<size_t>(hit - base) : std::string_view::npos;
}

}  // namespace

Status<SseError> SseParser::fail(SseError e, std::string msg) {
  failed_ = Error<SseError>{e, std::move(msg)};
  partial_.clear();
  partial_.shrink_to_fit();
  current_ = SseEvent{};
  return *failed_;
}

Status<SseError> SseParser::feed(std::string_view bytes) {
  if (failed_) {
    return *failed_;
  }
  size_t i = 0;
  if (skip_lf_ && !bytes.empty()) {
    skip_lf_ = false;
    if (bytes[0] == '\n') {
      i = 1;
    }
  }
  const size_t n = bytes.size();
  while (i < n) {
    const size_t pos = find_line_end(bytes, i);
    if (pos == std::string_view::npos) {
      if (partial_.size() + (n - i) > limits_.max_line_bytes) {
        return fail(SseError::line_too_large,
                    "SSE line exceeds " + std::to_string(limits_.max_line_bytes) + " bytes");
      }
      partial_.append(bytes.substr(i));
      break;
    }
    std::string_view l = bytes.substr(i, pos - i);
    if (!partial_.empty()) {
      if (partial_.size() + l.size() > limits_.max_line_bytes) {
        return fail(SseError::line_too_large,
                    "SSE line exceeds " + std::to_string(limits_.max_line_bytes) + " bytes");
      }
      partial_.append(l);
      l = partial_;
    } else if (l.size() > limits_.max_line_bytes) {
      return fail(SseError::line_too_large,
                  "SSE line exceeds " + std::to_string(limits_.max_line_bytes) + " bytes");
    }
    if (auto st = line(l); !st.ok()) {
      return st;
    }
    partial_.clear();
    size_t next = pos + 1;
    if (bytes[pos] == '\r') {
      if (next < n) {
        if (bytes[next] == '\n') {
          ++next;
        }
      } else {
        skip_lf_ = true;  // the LF of this CRLF may start the next feed
      }
    }
    i = next;
  }
  return Ok{};
}

Status<SseError> SseParser::line(std::string_view l) {
  if (!bom_checked_) {
    bom_checked_ = true;
    if (l.substr(0, 3) == "\xEF\xBB\xBF") {
      l.remove_prefix(3);
    }
  }
  if (l.empty()) {
    if (has_data_) {
      if (events_.size() >= limits_.max_pending_events) {
        return fail(SseError::too_many_events,
                    "more than " + std::to_string(limits_.max_pending_events) + " SSE events pending");
      }
      events_.push_back(std::move(current_));
      ++parsed_;
    }
    current_ = SseEvent{};
    has_data_ = false;
    return Ok{};
  }
  if (l.front() == ':') {
    ++comments_;
    return Ok{};
  }
  std::string_view field = l;
  std::string_view value;
  if (const size_t colon = l.find(':'); colon != std::string_view::npos) {
    field = l.substr(0, colon);
    value = l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') {
      value.remove_prefix(1);
    }
  }
  if (field == "data") {
    const size_t extra = value.size() + (has_data_ ? 1 : 0);
    if (current_.data.size() + extra > limits_.max_event_bytes) {
      return fail(SseError::event_too_large,
                  "SSE event data exceeds " + std::to_string(limits_.max_event_bytes) + " bytes");
    }
    if (has_data_) {
      current_.data.push_back('\n');
    }
    current_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    current_.event.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) {
      current_.id.assign(value);
    }
  } else if (field == "retry") {
    uint64_t ms = 0;
    const auto* end = value.data() + value.size();
    auto [p, ec] = std::from_chars(value.data(), end, ms);
    if (!value.empty() && ec == std::errc{} && p == end) {
      current_.retry_ms = ms;
    }
  }
  // Unknown fields are ignored, as the spec says.
  return Ok{};
}

bool SseParser::pop(SseEvent& out) {
  if (events_.empty()) {
    return false;
  }
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool SseParser::finish() {
  const bool pending = !partial_.empty() || has_data_;
  partial_.clear();
  current_ = SseEvent{};
  has_data_ = false;
  skip_lf_ = false;
  return pending;
}

namespace {

// Field values other than data must stay on one line or they would split the frame.
void append_single_line(std::string& out, std::string_view v) {
  for (char c : v) {
    out.push_back(c == '\r' || c == '\n' ? ' ' : c);
  }
}

}  // namespace

void append_sse_data(std::string& out, std::string_view data) {
  size_t i = 0;
  while (true) {
    const size_t pos = find_line_end(data, i);
    out.append("data: ");
    if (pos == std::string_view::npos) {
      out.append(data.substr(i));
      out.push_back('\n');
      break;
    }
    out.append(data.substr(i, pos - i));
    out.push_back('\n');
    i = pos + 1;
    if (data[pos] == '\r' && i < data.size() && data[i] == '\n') {
      ++i;
    }
  }
  out.push_back('\n');
}

void append_sse_event(std::string& out, const SseEvent& e) {
  if (!e.event.empty()) {
    out.append("event: ");
    append_single_line(out, e.event);
    out.push_back('\n');
  }
  if (!e.id.empty()) {
    out.append("id: ");
    append_single_line(out, e.id);
    out.push_back('\n');
  }
  if (e.retry_ms) {
    out.append("retry: ");
    out.append(std::to_string(*e.retry_ms));
    out.push_back('\n');
  }
  append_sse_data(out, e.data);
}

std::string format_sse_event(const SseEvent& e) {
  std::string out;
  out.reserve(e.data.size() + e.event.size() + e.id.size() + 16);
  append_sse_event(out, e);
  return out;
}

void append_sse_comment(std::string& out, std::string_view text) {
  out.append(": ");
  append_single_line(out, text);
  out.push_back('\n');
}

}  // namespace cgn::http
