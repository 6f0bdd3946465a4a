// OpenAI-style errors, the only error shape a client of Cognitora ever sees:
//   {"error":{"message":"...","type":"...","param":null|"...","code":null|"..."}}
// with the matching HTTP status.
#pragma once

#include <string>
#include <string_view>

namespace cgn {

struct ApiError {
  int status = 500;
  std::string type;     // "invalid_request_error", "authentication_error", ...
  std::string message;  // names the problem; never echoes secrets
  std::string param;    // empty -> null
  std::string code;     // empty -> null

  // The JSON body, properly escaped.
  std::string body() const;
};

ApiError bad_request(std::string message, std::string param = "", std::string code = "");
ApiError unauthorized(std::string message);
ApiError forbidden(std::string message);
ApiError not_found(std::string message, std::string param = "", std::string code = "");
ApiError method_not_allowed(std::string message);
ApiError payload_too_large(std::string message);
ApiError headers_too_large(std::string message);
ApiError unprocessable(std::string message, std::string param = "");
ApiError too_many_requests(std::string message, std::string code = "rate_limit_exceeded");
ApiError internal_error(std::string message);
ApiError not_implemented(std::string message, std::string code = "");
ApiError bad_gateway(std::string message);
ApiError service_unavailable(std::string message, std::string code = "");
ApiError gateway_timeout(std::string message);

// Escapes s as the contents of a JSON string (no surrounding quotes). Control bytes become \uXXXX
// escapes and bytes that are not well-formed UTF-8 become \ufffd, so the output is always valid JSON.
void append_json_escaped(std::string& out, std::string_view s);

}  // namespace cgn
