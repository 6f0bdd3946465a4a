#include "core/openai_error.h"

#include <cstdio>
#include <utility>

#include "core/text.h"

namespace cgn {

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF), or 0 if the bytes there are not one.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    lo = c == 0xE0 ? 0xA0 : 0x80;
    hi = c == 0xED ? 0x9F : 0xBF;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    lo = c == 0xF0 ? 0x90 : 0x80;
    hi = c == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 0;
  }
  if (i + n > s.size()) {
    return 0;
  }
  if (byte(i + 1) < lo || byte(i + 1) > hi) {
    return 0;
  }
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) {
      return 0;
    }
  }
  return n;
}

}  // namespace

void append_json_escaped(std::string& out, std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (const std::string_view e = text::short_escape(c); !e.empty()) {
      out += e;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (size_t n = utf8_sequence_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n - 1;
    } else {
      // Messages may quote client bytes (a model name, a header): an invalid byte becomes
      // U+FFFD so the body is always valid JSON.
      out += "\\ufffd";
    }
  }
}

namespace {
void append_nullable(std::string& out, const std::string& v) {
  if (v.empty()) {
    out += "null";
  } else {
    out += '"';
    append_json_escaped(out, v);
    out += '"';
  }
}

ApiError make(int status, const char* type, std::string message, std::string param = "",
              std::string code = "") {
  return ApiError{status, type, std::move(message), std::move(param), std::move(code)};
}
}  // namespace

std::string ApiError::body() const {
  std::string out;
  out.reserve(64 + message.size());
  out += R"({"error":{"message":")";
  append_json_escaped(out, message);
  out += R"(","type":")";
  append_json_escaped(out, type);
  out += R"(","param":)";
  append_nullable(out, param);
  out += R"(,"code":)";
  append_nullable(out, code);
  out += "}}";
  return out;
}

ApiError bad_request(std::string message, std::string param, std::string code) {
  return make(400, "invalid_request_error", std::move(message), std::move(param), std::move(code));
}
ApiError unauthorized(std::string message) {
  return make(401, "authentication_error", std::move(message), "", "invalid_api_key");
}
ApiError forbidden(std::string message) {
  return make(403, "permission_error", std::move(message));
}
ApiError not_found(std::string message, std::string param, std::string code) {
  return make(404, "not_found_error", std::move(message), std::move(param), std::move(code));
}
ApiError method_not_allowed(std::string message) {
  return make(405, "invalid_request_error", std::move(message));
}
ApiError payload_too_large(std::string message) {
  return make(413, "invalid_request_error", std::move(message), "", "request_too_large");
}
ApiError headers_too_large(std::string message) {
  return make(431, "invalid_request_error", std::move(message), "", "headers_too_large");
}
ApiError unprocessable(std::string message, std::string param) {
  return make(422, "invalid_request_error", std::move(message), std::move(param));
}
ApiError too_many_requests(std::string message, std::string code) {
  return make(429, "rate_limit_error", std::move(message), "", std::move(code));
}
ApiError internal_error(std::string message) {
  return make(500, "server_error", std::move(message));
}
ApiError not_implemented(std::string message, std::string code) {
  return make(501, "invalid_request_error", std::move(message), "", std::move(code));
}
ApiError bad_gateway(std::string message) {
  return make(502, "server_error", std::move(message), "", "upstream_error");
}
ApiError service_unavailable(std::string message, std::string code) {
  return make(503, "server_error", std::move(message), "", std::move(code));
}
ApiError gateway_timeout(std::string message) {
  return make(504, "server_error", std::move(message), "", "upstream_timeout");
}

}  // namespace cgn
