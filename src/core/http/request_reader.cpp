#include "core/http/request_reader.h"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <string>

namespace cgn::http {

RequestReader::RequestReader(RequestLimits limits) : limits_(limits) {
  reset();
}

void RequestReader::reset() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.max_body_bytes);
  parser_->eager(true);
  started_ = false;
}

RequestReader::State RequestReader::parse(boost::beast::flat_buffer& buf) {
  namespace bh = boost::beast::http;
  while (buf.size() > 0 && !parser_->is_done()) {
    started_ = true;
    boost::system::error_code ec;
    const size_t n = parser_->put(buf.data(), ec);
    buf.consume(n);
    if (ec == bh::error::need_more) {
      break;
    }
    if (ec) {
      if (ec == bh::error::header_limit) {
        error_ = headers_too_large("request headers exceed " + std::to_string(limits_.max_header_bytes) +
                                   " bytes");
      } else if (ec == bh::error::body_limit) {
        error_ =
            payload_too_large("request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
      } else {
        error_ = bad_request("malformed HTTP request: " + ec.message());
      }
      return State::error;
    }
    if (n == 0) {
      break;
    }
  }
  if (parser_->is_done()) {
    return State::done;
  }
  // Beast reports header_limit itself once the buffer holds more than the
  // limit; this guards the buffer size independently of that.
  if (!parser_->is_header_done() && buf.size() > limits_.max_header_bytes) {
    error_ =
        headers_too_large("request headers exceed " + std::to_string(limits_.max_header_bytes) + " bytes");
    return State::error;
  }
  return State::need_more;
}

bool RequestReader::wants_continue() const {
  return parser_ && parser_->is_header_done() && !parser_->is_done() &&
         boost::beast::iequals(parser_->get()[Field::expect], "100-continue");
}

Request RequestReader::take() {
  Request r = parser_->release();
  reset();
  return r;
}

}  // namespace cgn::http
