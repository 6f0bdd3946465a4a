#include "router/responses.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/digest.h"

namespace cgn::router {
namespace {

using nlohmann::json;

// The routing signal of a chat body, as request intake computes it: canonical prompt, tools and
// the prefix digests over them.
struct Signal {
  std::string prompt;
  std::string tools;
  std::vector<Digest> digests;
};
Signal chat_signal(const std::string& chat_body) {
  auto parsed = parse_openai_request(Endpoint::kChat, chat_body);
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
  Signal s;
  if (!parsed.ok()) {
    return s;
  }
  s.prompt = parsed->canonical_prompt;
  s.tools = parsed->canonical_tools;
  compute_prefix_digests(make_digest_seed(digest_seed_fields(*parsed)), s.prompt, 64, s.digests, 8192);
  return s;
}
Signal responses_signal(const std::string& responses_body) {
  auto t = translate_responses_request(responses_body);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  return t.ok() ? chat_signal(t->chat_body) : Signal{};
}

// An agent's third turn: instructions, a user message with an image, two parallel tool calls,
// their results, and the tools again.
const char* kResponsesTurn = R"({"model":"m","instructions":"You are terse.","input":[
  {"role":"user","content":[{"type":"input_text","text":"Weather in Paris and Rome? Also this:"},
                            {"type":"input_image","image_url":"data:image/png;base64,AAAA"}]},
  {"type":"reasoning","id":"rs_1","summary":[]},
  {"type":"function_call","call_id":"call_a","name":"weather","arguments":"{\"city\":\"Paris\"}"},
  {"type":"function_call","call_id":"call_b","name":"weather","arguments":"{\"city\":\"Rome\"}"},
  {"type":"function_call_output","call_id":"call_a","output":"18C"},
  {"type":"function_call_output","call_id":"call_b","output":"24C"},
  {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Paris 18C, Rome 24C."}]},
  {"role":"user","content":"And Oslo?"}],
  "tools":[{"type":"function","name":"weather","description":"Current weather",
            "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
  "tool_choice":{"type":"function","name":"weather"},"max_output_tokens":64,"stream":true})";

const char* kChatTurn = R"({"model":"m","messages":[
  {"role":"system","content":"You are terse."},
  {"role":"user","content":[{"type":"text","text":"Weather in Paris and Rome? Also this:"},
                            {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
  {"role":"assistant","content":null,"tool_calls":[
     {"id":"call_a","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
     {"id":"call_b","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}]},
  {"role":"tool","tool_call_id":"call_a","content":"18C"},
  {"role":"tool","tool_call_id":"call_b","content":"24C"},
  {"role":"assistant","content":[{"type":"text","text":"Paris 18C, Rome 24C."}]},
  {"role":"user","content":"And Oslo?"}],
  "tools":[{"type":"function","function":{"name":"weather","description":"Current weather",
            "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
  "tool_choice":{"type":"function","function":{"name":"weather"}},"max_tokens":64,"stream":true})";

TEST(Responses, RequestAndEquivalentChatHaveIdenticalDigests) {
  const Signal r = responses_signal(kResponsesTurn);
  const Signal c = chat_signal(kChatTurn);
  ASSERT_FALSE(c.digests.empty());
  EXPECT_EQ(r.prompt, c.prompt);
  EXPECT_EQ(r.tools, c.tools);
  EXPECT_FALSE(c.tools.empty());
  EXPECT_EQ(r.digests, c.digests);
  // Not vacuous: a different tool result is a different prompt.
  std::string other = kResponsesTurn;
  other.replace(other.find("24C"), 3, "25C");
  EXPECT_NE(responses_signal(other).digests, c.digests);
}

TEST(Responses, StringInputIsOneUserMessage) {
  const Signal r = responses_signal(R"({"model":"m","input":"hello there"})");
  const Signal c = chat_signal(R"({"model":"m","messages":[{"role":"user","content":"hello there"}]})");
  EXPECT_EQ(r.digests, c.digests);
  EXPECT_EQ(r.prompt, c.prompt);
}

TEST(Responses, TranslationKeepsStreamSessionAndPreviousId) {
  auto t = translate_responses_request(
      R"({"model":"m","input":"hi","stream":true,"prompt_cache_key":"s1","previous_response_id":"resp_9"})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->previous_response_id, "resp_9");
  auto parsed = parse_openai_request(Endpoint::kChat, t->chat_body);
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->stream);
  EXPECT_EQ(parsed->session_key, "s1");
  EXPECT_EQ(parsed->model, "m");
}

TEST(Responses, BadBodiesAreClearErrorsNamingTheField) {
  struct Case {
    const char* body;
    RequestError code;
    const char* param;
  };
  const Case cases[] = {
      {"[1]", RequestError::kMalformedJson, ""},
      {R"({"model":"m"})", RequestError::kMissingField, "input"},
      {R"({"model":"m","input":5})", RequestError::kWrongType, "input"},
      {R"({"model":"m","input":[7]})", RequestError::kWrongType, "input[0]"},
      {R"({"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]})",
       RequestError::kWrongType, "input[0].call_id"},
      {R"({"model":"m","input":[{"type":"function_call_output","output":"x"}]})", RequestError::kWrongType,
       "input[0].call_id"},
      {R"({"model":"m","input":[{"type":"item_reference","id":"x"}]})", RequestError::kInvalidValue,
       "input[0].type"},
      {R"({"model":"m","input":"x","instructions":3})", RequestError::kWrongType, "instructions"},
      {R"({"model":"m","input":"x","previous_response_id":""})", RequestError::kWrongType,
       "previous_response_id"},
  };
  for (const auto& c : cases) {
    auto t = translate_responses_request(c.body);
    ASSERT_FALSE(t.ok()) << c.body;
    EXPECT_EQ(t.error().code, c.code) << c.body;
    const ApiError e = to_api_error(t.error());
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << t.error().message;
  }
  RequestLimits small;
  small.max_json_depth = 4;
  auto deep = translate_responses_request(R"({"input":[{"content":[{"a":[1]}]}]})", small);
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().code, RequestError::kTooDeep);
}

TEST(Responses, ResponseIdFromABufferedAnswerOrTheCreatedEvent) {
  EXPECT_EQ(response_id_in(R"({"id":"resp_1","object":"response","status":"completed"})"), "resp_1");
  EXPECT_EQ(response_id_in(R"({"type":"response.created","sequence_number":0,)"
                           R"("response":{"id":"resp_2","object":"response","status":"in_progress"}})"),
            "resp_2");
  EXPECT_EQ(response_id_in(R"({"type":"response.output_text.delta","delta":"resp"})"), "");
  EXPECT_EQ(response_id_in(R"({"id":"chatcmpl-resp","object":"chat.completion"})"), "");
  EXPECT_EQ(response_id_in("not json resp"), "");
}

TEST(ResponseAffinity, RemembersTheNodeUntilTheTtl) {
  ManualClock clock;
  ResponseAffinity a(clock, 10, 60 * kNanosPerSecond);
  a.learn("resp_1", "n1");
  EXPECT_EQ(a.node_of("resp_1"), "n1");
  EXPECT_EQ(a.node_of("resp_2"), std::nullopt);
  clock.advance(61 * kNanosPerSecond);
  EXPECT_EQ(a.node_of("resp_1"), std::nullopt);
  a.learn("resp_1", "n2");  // learnt again: a fresh entry
  EXPECT_EQ(a.node_of("resp_1"), "n2");
  EXPECT_EQ(a.size(), 1u);
}

TEST(ResponseAffinity, BoundedOldestFirst) {
  ManualClock clock;
  ResponseAffinity a(clock, 3);
  for (int i = 0; i < 5; ++i) {
    const std::string id = fmt::format("resp_{}", i);
    a.learn(id, fmt::format("n{}", i));
  }
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a.node_of("resp_0"), std::nullopt);
  EXPECT_EQ(a.node_of("resp_1"), std::nullopt);
  EXPECT_EQ(a.node_of("resp_2"), "n2");
  EXPECT_EQ(a.node_of("resp_4"), "n4");
  a.learn("", "n9");  // no id, nothing learnt
  EXPECT_EQ(a.size(), 3u);
}

}  // namespace
}  // namespace cgn::router
