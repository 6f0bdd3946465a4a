// /v1/responses at the gateway: the OpenAI Responses API proxied with chat's routing, admission,
// failover and metrics (docs/api.md).
//
//   - Routing signal: a Responses body is translated to the chat/completions body it stands for
//     (translate_responses_request) and parsed as chat, so a Responses request and the
//     equivalent chat request have identical prefix digests: `instructions` is the system
//     message; `input` (a string, or items) the messages; consecutive `function_call` items one
//     assistant message with those tool calls (call_id as the id); a `function_call_output` item
//     a tool message; `reasoning` items are dropped (not part of a chat prompt); tools and
//     tool_choice in chat's nesting; max_output_tokens as max_tokens. The node gets the client's
//     body untouched.
//   - Follow-ups: a response lives on the engine that made it (vLLM keeps it in that process), so
//     a request with `previous_response_id` goes to that node. ResponseAffinity learns
//     response id -> node from each answer (the buffered body's `id`, or the `response.created`
//     event of a stream); an id it knows whose node has left the table gets a 400; an id it does
//     not know (expired, or made before this router started) is routed as usual and the engine
//     answers.
//   - An engine without the endpoint (its 404 is not an OpenAI error object) is failed over; when
//     none of the model's nodes serves it the client gets a 400 naming /v1/responses.
//
// Thread-safety: the functions are pure; ResponseAffinity is safe from any thread (one mutex).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/canonical.h"
#include "core/clock.h"
#include "router/request_plan.h"

namespace cgn::router {

inline constexpr std::string_view kResponsesEndpoint = "responses";  // the endpoint label

struct ResponsesRequest {
  std::string chat_body;             // the equivalent chat/completions body
  std::string previous_response_id;  // empty: none
};
// Errors name the field ("'input[2].call_id' must be a string") as parse_openai_request's do.
Result<ResponsesRequest, RequestError> translate_responses_request(std::string_view body,
                                                                   const RequestLimits& limits = {});

// The response id an answer announces: the `id` of a buffered `response` object, or
// `response.id` of a `response.created` event; empty when `data` is neither.
std::string response_id_in(std::string_view data);

// response id -> the node that holds it, bounded (the oldest entry goes first) and with a TTL.
class ResponseAffinity {
 public:
  static constexpr size_t kDefaultCapacity = 100'000;
  static constexpr Nanos kDefaultTtl = 3600 * kNanosPerSecond;

  explicit ResponseAffinity(const Clock& clock, size_t capacity = kDefaultCapacity, Nanos ttl = kDefaultTtl)
      : clock_(clock), capacity_(capacity), ttl_(ttl) {}

  void learn(std::string_view response_id, std::string_view node);
  // The node that holds `response_id`, if known and not expired.
  std::optional<std::string> node_of(std::string_view response_id) const;
  size_t size() const;

 private:
  struct Entry {
    std::string id;
    std::string node;
    Nanos learned = 0;
  };
  const Clock& clock_;
  const size_t capacity_;
  const Nanos ttl_;
  mutable std::mutex mu_;
  std::list<Entry> order_;  // oldest first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> by_id_;
};

// The plan of a /v1/responses request: pinned to the node that holds previous_response_id when
// the router knows it (a 400 when that node is gone), else ranked as chat is (AggregatedPlan).
class ResponsesPlan final : public RequestPlan {
 public:
  ResponsesPlan(GatewayServices& s, std::string previous_response_id)
      : s_(s), previous_(std::move(previous_response_id)) {}
  boost::asio::awaitable<void> serve(RequestContext& ctx, Dispatcher& d) override;

 private:
  GatewayServices& s_;
  std::string previous_;
};

}  // namespace cgn::router
