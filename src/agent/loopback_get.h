// A tiny blocking HTTP/1.1 GET for the agent's own engine on loopback: health probes and
// /metrics scrapes. One request per connection (Connection: close), a deadline over the whole
// exchange, a body cap, Content-Length and chunked bodies. Not a general client (the router's
// pooled client is core/http/client.h); the agent's supervisor and scrape threads block here by
// design. Thread-safe (no shared state).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace cgn::agent {

enum class GetError : uint8_t { kConnect, kTimeout, kIo, kBadResponse, kTooLarge };

std::string_view to_string(GetError e);

struct GetReply {
  unsigned status = 0;
  std::string body;
};

// host: an IPv4 literal (no DNS).
Result<GetReply, GetError> loopback_get(const std::string& host, uint16_t port, std::string_view path,
                                        std::chrono::milliseconds timeout, size_t max_body = 8 << 20);

// Parses a complete HTTP/1.x response (status line, headers, body as framed). Exposed for tests.
Result<GetReply, GetError> parse_http_response(std::string_view raw, size_t max_body);

}  // namespace cgn::agent
