// A streamed HTTP answer read to its end, for tests: status and headers, the body of a non-200
// answer, every SSE event's data in order ("[DONE]" included), or the transport error. Header
// only: a test including it links cgn_http (src/core/http) itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/http/client.h"

namespace cgn::testing {

struct StreamCapture {
  unsigned status = 0;
  http::Fields headers;
  std::string body;                 // non-200 answers: the error body
  std::vector<std::string> events;  // SSE data fields in order, "[DONE]" included
  std::string error;                // transport error (message and a space); empty when none
  http::HttpError error_code = http::HttpError::protocol;
};

// Fills `r`, which the caller keeps alive until this completes.
inline boost::asio::awaitable<void> capture_stream(http::HttpClient& c, const http::Upstream& up,
                                                   http::Request req, StreamCapture& r,
                                                   std::optional<http::ClientTimeouts> t = std::nullopt) {
  // One plain `co_await` in an initialisation: GCC 12 mishandles it inside a conditional
  // expression or a call's arguments.
  const http::ClientTimeouts timeouts = t ? *t : c.config().timeouts;
  auto s = co_await c.stream(up, std::move(req), timeouts);
  if (!s) {
    r.error = s.error().message + " ";
    r.error_code = s.error().code;
    co_return;
  }
  r.status = s->status();
  for (const auto& f : s->headers()) {
    r.headers.insert(f.name_string(), f.value());
  }
  if (r.status != 200) {
    auto all = co_await s->read_all();
    if (all) {
      r.body = *all;
    }
    co_return;
  }
  for (;;) {
    auto ev = co_await s->next_event();
    if (!ev) {
      r.error = ev.error().message + " ";
      r.error_code = ev.error().code;
      co_return;
    }
    if (!ev->has_value()) {
      co_return;
    }
    r.events.push_back((*ev)->data);
  }
}

}  // namespace cgn::testing
