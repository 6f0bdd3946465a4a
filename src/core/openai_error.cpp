#include "core/openai_error.h"

#include <cstdio>
#include <utility>

namespace cgn {

void append_json_escaped(std::string& out, std::string_view s) {
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
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
ApiError forbidden(std::string message) { return make(403, "permission_error", std::move(message)); }
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
ApiError internal_error(std::string message) { return make(500, "server_error", std::move(message)); }
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
