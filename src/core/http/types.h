// Message types and errors shared by the HTTP server and client. Requests and
// responses are Beast messages with std::string bodies: header access is
// case-insensitive (req[http::field::content_type], req["X-CGN-Role"]), and a
// proxy can forward them without converting.
#pragma once

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>
#include <string>
#include <string_view>

#include "core/openai_error.h"
#include "core/result.h"

namespace cgn::http {

namespace beast_http = boost::beast::http;

using Request = beast_http::request<beast_http::string_body>;
using Response = beast_http::response<beast_http::string_body>;
using Fields = beast_http::fields;
using Field = beast_http::field;
using Verb = beast_http::verb;

// Errors of this layer, returned as values (Result<T, HttpError>).
enum class HttpError {
  connect_failed,  // resolve, TCP connect or TLS handshake failed
  timeout,         // a connect/header/body/idle/write deadline passed
  closed,          // the peer closed the connection (or it was closed under us)
  too_large,       // a header or body limit was exceeded
  protocol,        // malformed HTTP from the peer
  cancelled,       // the operation was cancelled (client gone, shutdown)
  tls,             // TLS setup failed (certificate, key, context)
  bind_failed,     // the listener could not bind or listen
  invalid_state,   // API misuse, e.g. writing a body chunk before begin_stream()
};

const char* to_string(HttpError e);

template <class T>
using HttpResult = Result<T, HttpError>;
using HttpStatus = Status<HttpError>;

inline Error<HttpError> http_error(HttpError code, std::string message) {
  return Error<HttpError>{code, std::move(message)};
}

// Agent -> router: set on the agent's 5xx answer when its engine closed the connection before
// answering (it probably crashed on this request). The router then retries the request at most
// once, as for a node that closed the connection itself.
inline constexpr std::string_view kFailureHeader = "X-CGN-Failure";
inline constexpr std::string_view kFailureEngineClosed = "engine_closed";

// The path part of a request target ("/v1/models?x=1" -> "/v1/models").
std::string_view path_of(std::string_view target);

// A response with the given status, content type and body (Content-Length set).
Response make_response(unsigned status, std::string body, std::string_view content_type = "application/json");
// The OpenAI-style JSON error response for an ApiError.
Response make_error_response(const ApiError& error);

}  // namespace cgn::http
