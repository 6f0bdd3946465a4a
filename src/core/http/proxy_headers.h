// The header rules of Cognitora's two proxy hops (client -> router -> agent -> engine), kept in
// one place so the router and the agent cannot drift apart.
//
// Requests: a client's headers reach an engine only when they are on an explicit allow-list
// (kClientHeaders): content negotiation, the OpenAI organisation/project/beta headers and W3C
// trace context. Everything else a client sends (Authorization, X-Forwarded-For, X-Sim-Fault,
// Cookie, headers named in Connection:, ...) stays at the first hop. Cognitora's own headers
// (X-CGN-*, X-Request-Id, X-Forwarded-For) are set by the router and passed on by the agent.
// Responses: everything end-to-end is relayed; hop-by-hop fields (RFC 9110 §7.6.1), including the
// ones an upstream names in its Connection header, are not.
//
// Pure functions, thread-safe.
#pragma once

#include <string_view>

#include "core/http/types.h"

namespace cgn::http {

// The client headers an engine may see (case-insensitive).
inline constexpr std::string_view kClientHeaders[] = {
    "content-type",   "accept",      "user-agent",  "openai-organization",
    "openai-project", "openai-beta", "traceparent", "tracestate",
};

// Connection-scoped fields and the framing every hop sets itself (Content-Length, Host, ...).
bool is_hop_by_hop(std::string_view name);
// Whether `name` is listed in the Connection header(s) of `fields` (then it is hop-by-hop too).
bool named_in_connection(const Fields& fields, std::string_view name);
bool is_client_header_allowed(std::string_view name);
// X-CGN-*, X-Request-Id, X-Forwarded-For: what the router sets for the next hop.
bool is_cognitora_header(std::string_view name);

// Copies the allow-listed client headers of `in` into `out` (not those named in Connection:).
void copy_client_headers(const Fields& in, Fields& out);
// Copies the allow-listed client headers and the Cognitora headers (the agent's hop).
void copy_forwarded_headers(const Fields& in, Fields& out);
// Copies a response's end-to-end headers: not hop-by-hop, not named in its Connection header, and
// with `drop_cognitora` not the Cognitora headers either (the router sets its own for the client).
void copy_response_headers(const Fields& in, Fields& out, bool drop_cognitora = false);

// The address part of "ADDR:PORT" (Exchange::remote_address(); IPv6 without brackets); the input
// itself when it ends in no port.
std::string_view peer_address(std::string_view remote_address);

// X-Forwarded-For for the next hop: the peer's address from "ADDR:PORT" (what the client sent is
// never trusted or appended to).
void set_forwarded_for(Fields& out, std::string_view remote_address);

}  // namespace cgn::http
