// What a cascade sends to each step and does with a gated step's buffered answer (docs/cascade.md).
//
// Bodies: every step gets the client's body with `model` set to the step's model. A gated step's
// body also asks for a buffered answer with the sampled tokens' logprobs (chat: stream false,
// logprobs true; completions: stream false, logprobs 0 unless the client asked for more), without
// stream_options (engines refuse them on a buffered request).
//
// Answers: a gated answer is an OpenAI chat.completion / text_completion body. Its token logprobs
// (choice by choice) feed the confidence rule; an accepted answer goes to the client either as
// that body or re-chunked as a stream (chat.completion.chunk / text_completion events, one per
// token when the logprobs name the tokens, else one per word, then the finish and usage chunks
// and [DONE]), in both cases without logprobs unless the client asked for them.
//
// Pure functions over JSON text; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cgn::router::cascade {

enum class AnswerError {
  kMalformed,  // not a JSON object, or no `choices` array
};

// What the client's body asked for, read once.
struct ClientAsk {
  bool chat = true;
  bool logprobs = false;       // the client wants logprobs in the answer
  bool include_usage = false;  // stream_options.include_usage
};

struct StepBodies {
  std::string gated;  // for the gated steps (its model set per step by body_for)
  std::string final;  // for the last step
  ClientAsk ask;
  nlohmann::json client;  // the parsed client body
};

// Parses the client's body (the intake has already validated it).
Result<StepBodies, AnswerError> read_client_body(std::string_view body, bool chat);
// The body a step sends: the gated or final form with `model` set.
std::string body_for(const StepBodies& b, std::string_view model, bool gated);

struct GatedAnswer {
  nlohmann::ordered_json body;
  // Per choice, the logprob of each sampled token in order (empty when the choice had none).
  std::vector<std::vector<double>> token_logprobs;
};
Result<GatedAnswer, AnswerError> read_answer(std::string_view body, bool chat);

// The answer as the client gets it buffered: logprobs dropped unless asked for.
std::string buffered_for_client(GatedAnswer a, const ClientAsk& ask);
// The answer as the SSE events' data fields, "[DONE]" last.
std::vector<std::string> stream_for_client(const GatedAnswer& a, const ClientAsk& ask);

}  // namespace cgn::router::cascade
