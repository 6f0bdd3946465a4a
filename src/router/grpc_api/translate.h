// Generate <-> the OpenAI HTTP API, as pure functions (docs/grpc-api.md). A GenerateRequest
// becomes the equivalent chat/completions (messages) or completions (prompt) request with the
// X-CGN-Priority / X-CGN-Deadline-Ms headers; the router's answer (SSE chunks, or one buffered
// body) becomes GenerateResponse messages; an HTTP error becomes a gRPC status with the OpenAI
// error's message. No I/O here: the server (server.h) drives them.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cognitora/v1/router.pb.h"
#include "core/result.h"

namespace cgn::router::grpc_api {

enum class TranslateError : uint8_t { kInvalid };

// The HTTP request a Generate call stands for.
struct HttpCall {
  std::string path;                                          // /v1/chat/completions or /v1/completions
  std::string body;                                          // JSON
  std::vector<std::pair<std::string, std::string>> headers;  // X-CGN-Priority, X-CGN-Deadline-Ms
};

// `grpc_deadline_ms`: what is left of the call's own gRPC deadline (0: none); the request's
// deadline_ms and it, whichever is sooner, go as X-CGN-Deadline-Ms. kInvalid names the field.
Result<HttpCall, TranslateError> to_http(const cognitora::v1::GenerateRequest& req, int64_t grpc_deadline_ms);

// One SSE event's data (an OpenAI chunk) as a GenerateResponse; nullopt for "[DONE]" and for
// chunks that carry nothing (a role-only delta). An `error` object in the stream comes back as
// the status it stands for.
Result<std::optional<cognitora::v1::GenerateResponse>, grpc::StatusCode> from_chunk(std::string_view data);

// A buffered answer (chat.completion or text_completion) as one GenerateResponse.
Result<cognitora::v1::GenerateResponse, grpc::StatusCode> from_body(std::string_view body);

// The gRPC code for an HTTP status the router answered with (table in docs/grpc-api.md).
grpc::StatusCode code_for_http(unsigned http_status);

// An HTTP error answer as a gRPC status: the mapped code and the OpenAI error's message (the
// body itself when it is not an OpenAI error). A 429 whose error code is deadline_exceeded (the
// deadline cannot be met) is DEADLINE_EXCEEDED.
grpc::Status status_for_http(unsigned http_status, std::string_view body);

// A gRPC peer ("ipv4:1.2.3.4:5", "ipv6:[::1]:5", also with %5B/%5D) as the HTTP server writes a
// client's address ("1.2.3.4:5", "::1:5"); anything else (a Unix socket) as it is.
std::string remote_of_peer(std::string_view peer);

// The code's name as Prometheus labels and logs write it: "OK", "RESOURCE_EXHAUSTED", ...
std::string_view code_name(grpc::StatusCode code);

}  // namespace cgn::router::grpc_api
