// Bounded incremental parsing of HTTP/1.x requests from a byte buffer. The
// server connection feeds it whatever the socket delivered; it also stands
// alone so the fuzz target can drive it without sockets.
// Not thread-safe: one reader per connection.
#pragma once

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <charconv>
#include <optional>

#include "core/http/types.h"

namespace cgn::http {

struct RequestLimits {
  size_t max_header_bytes = size_t{16} * 1024;
  size_t max_body_bytes = size_t{16} * 1024 * 1024;
};

class RequestReader {
 public:
  enum class State {
    need_more,  // feed more bytes (headers or body incomplete)
    done,       // a complete request: take() it
    error,      // malformed or over a limit: answer error_response() and close
  };

  explicit RequestReader(RequestLimits limits);

  // Starts a new request (after take(), or at connection start).
  void reset();
  // Parses from the front of buf, consuming what was used. Bytes after a
  // complete request stay in buf (pipelining).
  State parse(boost::beast::flat_buffer& buf);

  bool header_done() const { return parser_ && parser_->is_header_done(); }
  // Headers are complete, the body is not, and the client waits for "100 Continue".
  bool wants_continue() const;
  bool started() const { return started_; }
  // The 400/413/431/501 to send when parse() returned error: malformed input, a body or headers
  // over a limit, a Transfer-Encoding other than one "chunked" (501), an HTTP/1.1 request
  // without exactly one Host (400).
  const ApiError& error() const { return error_; }

  bool keep_alive() const { return parser_ && parser_->keep_alive(); }
  // Once header_done(): the request line and headers (the body is still arriving).
  const Request& head() const { return parser_->get(); }
  // Once header_done(): the announced body length; nullopt when chunked.
  // Read from the header the parser already validated (one value, digits only), not through
  // its boost::optional, which GCC 12 at -O1 with sanitizers wrongly calls maybe-uninitialized.
  std::optional<uint64_t> content_length() const {
    const auto& h = parser_->get();
    const auto it = h.find(boost::beast::http::field::content_length);
    if (it == h.end()) {
      return std::nullopt;
    }
    uint64_t n = 0;
    const auto v = it->value();
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() && end == v.data() + v.size() ? std::optional<uint64_t>(n) : std::nullopt;
  }
  // Body bytes parsed so far.
  size_t body_bytes() const { return parser_->get().body().size(); }
  Request take();

 private:
  RequestLimits limits_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  ApiError error_;
  bool started_ = false;
  bool framing_checked_ = false;  // Transfer-Encoding and Host checked for this request
};

}  // namespace cgn::http
