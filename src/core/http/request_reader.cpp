#include "core/http/request_reader.h"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace cgn::http {

namespace {

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// What Beast leaves to the server (RFC 9112): the only transfer coding this server implements is
// a single "chunked"; any other coding would otherwise be read as an empty body and the bytes
// after it as the next request (§6.1: 501). An HTTP/1.1 request carries exactly one Host (§3.2: 400).
std::optional<ApiError> check_framing(
    const boost::beast::http::request_parser<boost::beast::http::string_body>& p) {
  const auto& h = p.get();
  size_t chunked = 0;
  for (auto it = h.find(Field::transfer_encoding); it != h.end() && it->name() == Field::transfer_encoding;
       ++it) {
    std::string_view list = it->value();
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view coding = trim_ows(list.substr(0, comma));
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      if (coding.empty()) {
        continue;
      }
      if (!boost::beast::iequals(coding, "chunked")) {
        return not_implemented("Transfer-Encoding \"" + std::string(coding.substr(0, 64)) +
                                   "\" is not implemented; send the body with Content-Length or chunked",
                               "unsupported_transfer_encoding");
      }
      ++chunked;
    }
  }
  if (chunked > 1) {
    return bad_request("malformed HTTP request: chunked applied more than once");
  }
  if (h.version() >= 11) {
    const size_t hosts = h.count(Field::host);
    if (hosts != 1) {
      return bad_request(hosts == 0 ? "malformed HTTP request: an HTTP/1.1 request needs a Host header"
                                    : "malformed HTTP request: more than one Host header");
    }
  }
  return std::nullopt;
}

}  // namespace

RequestReader::RequestReader(RequestLimits limits) : limits_(limits) {
  reset();
}

void RequestReader::reset() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.max_body_bytes);
  parser_->eager(false);  // stop after the header: its framing is checked before any body byte
  started_ = false;
  framing_checked_ = false;
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
    if (!framing_checked_ && parser_->is_header_done()) {
      // Refused whole, and the connection closed: nothing after it is read as another request.
      framing_checked_ = true;
      if (auto bad = check_framing(*parser_)) {
        error_ = std::move(*bad);
        return State::error;
      }
      parser_->eager(true);
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
