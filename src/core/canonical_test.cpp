// Request parsing and canonicalisation (docs/architecture/digests.md,
// "Canonical prompt bytes"): edge cases, bounds and errors, multi-turn
// prefix stability and the exact round trip of a real vLLM reply.
#include "core/canonical.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/digest.h"
#include "testing/process.h"

namespace cgn {
namespace {

using json = nlohmann::json;

ParsedRequest parse_ok(Endpoint endpoint, const std::string& body, const RequestLimits& limits = {}) {
  auto r = parse_openai_request(endpoint, body, limits);
  EXPECT_TRUE(r.ok()) << body.substr(0, 300) << "\n-> " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : ParsedRequest{};
}

Error<RequestError> parse_err(Endpoint endpoint, const std::string& body, const RequestLimits& limits = {}) {
  auto r = parse_openai_request(endpoint, body, limits);
  EXPECT_FALSE(r.ok()) << body.substr(0, 300);
  return r.ok() ? Error<RequestError>{} : r.error();
}

std::string chat_canonical(const json& messages) {
  return parse_ok(Endpoint::kChat, json{{"model", "m"}, {"messages", messages}}.dump()).canonical_prompt;
}

std::string msg(std::string_view role, std::string_view content) {
  return std::string(role) + kUnitSep + std::string(content) + kRecordSep;
}

std::vector<Digest> digests_of(const ParsedRequest& r, uint32_t block = 64) {
  std::vector<Digest> out;
  compute_prefix_digests(make_digest_seed(digest_seed_fields(r)), r.canonical_prompt, block, out);
  return out;
}

bool is_prefix(const std::vector<Digest>& a, const std::vector<Digest>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// --- chat layout -------------------------------------------------------------

TEST(Canonical, chat_messages_are_role_us_content_rs_in_order) {
  EXPECT_EQ(chat_canonical(json::array(
                {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}})),
            msg("system", "Be brief.") + msg("user", "Hi"));
}

TEST(Canonical, string_content_equals_a_single_text_part) {
  EXPECT_EQ(chat_canonical(json::array({{{"role", "user"}, {"content", "hello"}}})),
            chat_canonical(json::array(
                {{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "hello"}}})}}})));
}

TEST(Canonical, text_parts_concatenate_and_image_audio_file_parts_are_skipped) {
  const json parts = json::array({
      {{"type", "text"}, {"text", "look at "}},
      {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}},
      {{"type", "input_audio"}, {"input_audio", {{"data", "UklG"}, {"format", "wav"}}}},
      {{"type", "file"}, {"file", {{"file_id", "f1"}}}},
      {{"type", "text"}, {"text", "this"}},
  });
  EXPECT_EQ(chat_canonical(json::array({{{"role", "user"}, {"content", parts}}})),
            msg("user", "look at this"));
  // An image-only message still counts as a message, with empty text.
  const json image_only = json::array({{{"type", "image_url"}, {"image_url", {{"url", "http://x/y.png"}}}}});
  EXPECT_EQ(chat_canonical(json::array({{{"role", "user"}, {"content", image_only}}})), msg("user", ""));
}

TEST(Canonical, name_follows_role_and_empty_name_is_no_name) {
  EXPECT_EQ(chat_canonical(json::array({{{"role", "user"}, {"name", "alice"}, {"content", "hi"}}})),
            std::string("user") + kUnitSep + "alice" + kUnitSep + "hi" + kRecordSep);
  EXPECT_EQ(chat_canonical(json::array({{{"role", "user"}, {"name", ""}, {"content", "hi"}}})),
            msg("user", "hi"));
  EXPECT_EQ(chat_canonical(json::array({{{"role", "user"}, {"name", nullptr}, {"content", "hi"}}})),
            msg("user", "hi"));
}

TEST(Canonical, assistant_tool_calls_follow_content_in_order_and_tool_messages_carry_their_id) {
  const json messages = json::array({
      {{"role", "user"}, {"content", "weather?"}},
      {{"role", "assistant"},
       {"content", "Checking."},
       {"tool_calls", json::array({
                          {{"id", "call_1"},
                           {"type", "function"},
                           {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Bern\"}"}}}},
                          {{"id", "call_2"},
                           {"type", "function"},
                           {"function", {{"name", "get_time"}, {"arguments", "{}"}}}},
                      })}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "12C"}},
  });
  const std::string expected = msg("user", "weather?") + "assistant" + kUnitSep + "Checking." + kGroupSep +
                               "get_weather" + kUnitSep + "{\"city\": \"Bern\"}" + kGroupSep + "get_time" +
                               kUnitSep + "{}" + kRecordSep + "tool" + kUnitSep + "call_1" + kUnitSep +
                               "12C" + kRecordSep;
  EXPECT_EQ(chat_canonical(messages), expected);
}

TEST(Canonical, tool_message_name_precedes_tool_call_id) {
  EXPECT_EQ(chat_canonical(
                json::array({{{"role", "tool"}, {"tool_call_id", "c"}, {"name", "f"}, {"content", "r"}}})),
            std::string("tool") + kUnitSep + "f" + kUnitSep + "c" + kUnitSep + "r" + kRecordSep);
}

TEST(Canonical, legacy_function_call_is_a_tool_call_and_object_arguments_are_canonical_json) {
  const std::string expected = std::string("assistant") + kUnitSep + kGroupSep + "f" + kUnitSep +
                               R"({"a":1,"b":[true,null]})" + kRecordSep;
  EXPECT_EQ(chat_canonical(json::array(
                {{{"role", "assistant"},
                  {"content", nullptr},
                  {"function_call", {{"name", "f"}, {"arguments", "{\"a\":1,\"b\":[true,null]}"}}}}})),
            expected);
  EXPECT_EQ(
      chat_canonical(json::array(
          {{{"role", "assistant"},
            {"tool_calls",
             json::array(
                 {{{"function", {{"name", "f"}, {"arguments", {{"b", {true, nullptr}}, {"a", 1.0}}}}}}})}}})),
      expected);
}

TEST(Canonical, null_empty_missing_and_empty_array_content_are_the_same) {
  const std::string expected = msg("assistant", "");
  EXPECT_EQ(chat_canonical(json::array({{{"role", "assistant"}, {"content", nullptr}}})), expected);
  EXPECT_EQ(chat_canonical(json::array({{{"role", "assistant"}, {"content", ""}}})), expected);
  EXPECT_EQ(chat_canonical(json::array({{{"role", "assistant"}}})), expected);
  EXPECT_EQ(chat_canonical(json::array({{{"role", "assistant"}, {"content", json::array()}}})), expected);
}

TEST(Canonical, unicode_escapes_and_raw_utf8_give_the_same_bytes) {
  const std::string raw = R"({"model":"m","messages":[{"role":"user","content":"caf)"
                          "\xc3\xa9 \xf0\x9f\x98\x80 \xe4\xb8\xad\"}]}";
  const std::string escaped =
      R"({"model":"m","messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude00 \u4e2d"}]})";
  const auto a = parse_ok(Endpoint::kChat, raw);
  EXPECT_EQ(a.canonical_prompt, msg("user", "caf\xc3\xa9 \xf0\x9f\x98\x80 \xe4\xb8\xad"));
  EXPECT_EQ(parse_ok(Endpoint::kChat, escaped).canonical_prompt, a.canonical_prompt);
  // No Unicode normalisation: a decomposed e + combining acute is other bytes.
  EXPECT_NE(chat_canonical(json::array({{{"role", "user"}, {"content", "cafe\xcc\x81"}}})),
            a.canonical_prompt);
}

TEST(Canonical, invalid_utf8_is_malformed) {
  const auto e =
      parse_err(Endpoint::kChat, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}");
  EXPECT_EQ(e.code, RequestError::kMalformedJson);
  EXPECT_NE(e.message.find("UTF-8"), std::string::npos) << e.message;
}

TEST(Canonical, very_long_message_is_kept_whole) {
  const std::string big(3 * 1024 * 1024, 'x');
  const auto r = parse_ok(Endpoint::kChat,
                          json{{"model", "m"}, {"messages", {{{"role", "user"}, {"content", big}}}}}.dump());
  EXPECT_EQ(r.canonical_prompt, msg("user", big));
  EXPECT_EQ(digests_of(r, 1024).size(), r.canonical_prompt.size() / 1024);
}

TEST(Canonical, duplicate_keys_take_the_last_value_like_python) {
  const auto r = parse_ok(
      Endpoint::kChat, R"({"model":"a","model":"b","messages":[{"role":"user","content":1,"content":"x"}]})");
  EXPECT_EQ(r.model, "b");
  EXPECT_EQ(r.canonical_prompt, msg("user", "x"));
}

// --- typed fields ------------------------------------------------------------

TEST(Canonical, chat_fields_are_parsed) {
  const auto r =
      parse_ok(Endpoint::kChat, R"({"model":"llama","stream":true,"stream_options":{"include_usage":true},
      "max_tokens":10,"max_completion_tokens":20,"user":"u1","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(r.endpoint, Endpoint::kChat);
  EXPECT_EQ(r.model, "llama");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 20);  // max_completion_tokens wins over the deprecated max_tokens
  EXPECT_EQ(r.message_count, 1u);
  EXPECT_FALSE(r.has_tools);
  EXPECT_EQ(r.session_key, "u1");

  const auto d = parse_ok(Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"x"}]})");
  EXPECT_FALSE(d.stream);
  EXPECT_FALSE(d.include_usage);
  EXPECT_FALSE(d.max_tokens.has_value());
  EXPECT_TRUE(d.session_key.empty());
}

TEST(Canonical, prompt_cache_key_is_the_session_key_before_user) {
  const auto r = parse_ok(
      Endpoint::kChat,
      R"({"model":"m","user":"u","prompt_cache_key":"k","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(r.session_key, "k");
}

TEST(Canonical, tools_are_canonical_json_whatever_the_spacing_and_key_order) {
  const auto a = parse_ok(Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"x"}],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"b":{},"a":{}}}}}]})");
  const auto b =
      parse_ok(Endpoint::kChat, R"({"tools" : [ { "function" : { "parameters" : { "properties" : { "a" : {} ,
      "b" : { } } , "type" : "object" } , "name" : "f" } , "type" : "function" } ] ,
      "model":"m","messages":[{"role":"user","content":"x"}]})");
  EXPECT_TRUE(a.has_tools);
  EXPECT_EQ(
      a.canonical_tools,
      R"([{"function":{"name":"f","parameters":{"properties":{"a":{},"b":{}},"type":"object"}},"type":"function"}])");
  EXPECT_EQ(a.canonical_tools, b.canonical_tools);
  EXPECT_EQ(digests_of(a), digests_of(b));
}

TEST(Canonical, tools_change_the_seed_and_empty_tools_are_no_tools) {
  const std::string long_user = std::string(R"({"role":"user","content":")") + std::string(500, 'q') + "\"}";
  const auto none = parse_ok(Endpoint::kChat, R"({"model":"m","messages":[)" + long_user + "]}");
  const auto empty = parse_ok(Endpoint::kChat, R"({"model":"m","tools":[],"messages":[)" + long_user + "]}");
  const auto nul = parse_ok(Endpoint::kChat, R"({"model":"m","tools":null,"messages":[)" + long_user + "]}");
  const auto one = parse_ok(
      Endpoint::kChat, R"({"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"messages":[)" +
                           long_user + "]}");
  EXPECT_FALSE(empty.has_tools);
  EXPECT_TRUE(empty.canonical_tools.empty());
  EXPECT_EQ(digests_of(none), digests_of(empty));
  EXPECT_EQ(digests_of(none), digests_of(nul));
  EXPECT_TRUE(one.has_tools);
  EXPECT_EQ(one.canonical_prompt, none.canonical_prompt);  // tools are in the seed, not the prompt bytes
  ASSERT_FALSE(digests_of(one).empty());
  EXPECT_NE(digests_of(one)[0], digests_of(none)[0]);
}

TEST(Canonical, canonical_json_sorts_keys_normalises_numbers_and_escapes_fixed) {
  auto c = canonical_json(R"({ "b" : [1, 1.0, 1e0, 1.5e3, 1E5, -0.0, 0.1, 1e20, 1e-7, 12345678901234567890,
      -9007199254740993, 123456789012345678900.5], "a" : "first", "a" : "last", "c": {"z": null, "y": false}})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c,
            "{\"a\":\"last\",\"b\":[1,1,1,1500,100000,0,0.1,1e+20,1e-07,12345678901234567890,"
            "-9007199254740993,1.2345678901234568e+20],\"c\":{\"y\":false,\"z\":null}}");
  auto s = canonical_json(R"(["q\"\\\/\b\f\n\r\t\u0001\u001f\u007f\u00e9\u2028"])");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "[\"q\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xc3\xa9\xe2\x80\xa8\"]");
}

TEST(Canonical, canonical_json_is_idempotent) {
  const std::string input = R"({"z":[{"k":"v","a":[1,2,{"x":0.25}]}],"a":"\u00e9\n"})";
  auto once = canonical_json(input);
  ASSERT_TRUE(once.ok());
  auto twice = canonical_json(*once);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(*once, *twice);
}

// --- completions and embeddings ----------------------------------------------

TEST(Canonical, completions_prompt_string_is_the_canonical_bytes) {
  const auto r =
      parse_ok(Endpoint::kCompletions, R"({"model":"m","prompt":"Once upon","max_tokens":5,"stream":true})");
  EXPECT_EQ(r.canonical_prompt, "Once upon");
  EXPECT_EQ(r.prompt_count, 1u);
  EXPECT_FALSE(r.prompt_is_tokens);
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_TRUE(r.stream);
}

TEST(Canonical, completions_prompt_array_keys_on_the_first_prompt) {
  const auto r = parse_ok(Endpoint::kCompletions, R"({"model":"m","prompt":["first","second"]})");
  EXPECT_EQ(r.canonical_prompt, "first");
  EXPECT_EQ(r.prompt_count, 2u);
  EXPECT_EQ(parse_err(Endpoint::kCompletions, R"({"model":"m","prompt":["a",1]})").code,
            RequestError::kWrongType);
  EXPECT_EQ(parse_err(Endpoint::kCompletions, R"({"model":"m","prompt":[]})").code,
            RequestError::kInvalidValue);
}

TEST(Canonical, completions_token_ids_are_u32_little_endian) {
  const auto r = parse_ok(Endpoint::kCompletions, R"({"model":"m","prompt":[1, 258, 4294967295]})");
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.canonical_prompt, std::string("\x01\x00\x00\x00\x02\x01\x00\x00\xff\xff\xff\xff", 12));
  const auto batch = parse_ok(Endpoint::kCompletions, R"({"model":"m","prompt":[[7],[8,9]]})");
  EXPECT_TRUE(batch.prompt_is_tokens);
  EXPECT_EQ(batch.prompt_count, 2u);
  EXPECT_EQ(batch.canonical_prompt, std::string("\x07\x00\x00\x00", 4));
  EXPECT_EQ(parse_err(Endpoint::kCompletions, R"({"model":"m","prompt":[4294967296]})").code,
            RequestError::kInvalidValue);
  EXPECT_EQ(parse_err(Endpoint::kCompletions, R"({"model":"m","prompt":[-1]})").code,
            RequestError::kInvalidValue);
  EXPECT_EQ(parse_err(Endpoint::kCompletions, R"({"model":"m","prompt":[[1],[2.5]]})").code,
            RequestError::kWrongType);
}

TEST(Canonical, embeddings_input_is_canonicalised_like_a_prompt) {
  const auto r =
      parse_ok(Endpoint::kEmbeddings, R"({"model":"e5","input":["a doc","b doc"],"prompt":"ignored"})");
  EXPECT_EQ(r.canonical_prompt, "a doc");
  EXPECT_EQ(r.prompt_count, 2u);
  EXPECT_EQ(parse_err(Endpoint::kEmbeddings, R"({"model":"e5"})").code, RequestError::kMissingField);
}

// --- errors and bounds ---------------------------------------------------------

TEST(Canonical, errors_name_the_field_and_map_to_openai_400_with_param) {
  struct Case {
    std::string body;
    RequestError code;
    std::string param;
  };
  const std::vector<Case> cases = {
      {R"({"messages":[{"role":"user","content":"x"}]})", RequestError::kMissingField, "model"},
      {R"({"model":7,"messages":[]})", RequestError::kWrongType, "model"},
      {R"({"model":"","messages":[{"role":"user","content":"x"}]})", RequestError::kInvalidValue, "model"},
      {R"({"model":"m"})", RequestError::kMissingField, "messages"},
      {R"({"model":"m","messages":[]})", RequestError::kEmptyMessages, "messages"},
      {R"({"model":"m","messages":{}})", RequestError::kWrongType, "messages"},
      {R"({"model":"m","messages":["hi"]})", RequestError::kWrongType, "messages[0]"},
      {R"({"model":"m","messages":[{"content":"x"}]})", RequestError::kMissingField, "messages[0].role"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","content":5}]})",
       RequestError::kWrongType, "messages[1].content"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]})",
       RequestError::kMissingField, "messages[0].content[0].text"},
      {R"({"model":"m","messages":[{"role":"user","content":[3]}]})", RequestError::kWrongType,
       "messages[0].content[0]"},
      {R"({"model":"m","messages":[{"role":"user","name":1,"content":"x"}]})", RequestError::kWrongType,
       "messages[0].name"},
      {R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c"}]}]})",
       RequestError::kMissingField, "messages[0].tool_calls[0].function"},
      {R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]})",
       RequestError::kMissingField, "messages[0].tool_calls[0].function.name"},
      {R"({"model":"m","messages":[{"role":"assistant","tool_calls":{}}]})", RequestError::kWrongType,
       "messages[0].tool_calls"},
      {R"({"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]})", RequestError::kWrongType,
       "stream"},
      {R"({"model":"m","stream_options":{"include_usage":1},"messages":[{"role":"user","content":"x"}]})",
       RequestError::kWrongType, "stream_options.include_usage"},
      {R"({"model":"m","max_tokens":-1,"messages":[{"role":"user","content":"x"}]})",
       RequestError::kInvalidValue, "max_tokens"},
      {R"({"model":"m","max_tokens":"5","messages":[{"role":"user","content":"x"}]})",
       RequestError::kWrongType, "max_tokens"},
      {R"({"model":"m","tools":{},"messages":[{"role":"user","content":"x"}]})", RequestError::kWrongType,
       "tools"},
      {R"({"model":"m","user":5,"messages":[{"role":"user","content":"x"}]})", RequestError::kWrongType,
       "user"},
      {R"([1,2])", RequestError::kWrongType, ""},
      {R"({"model":"m",)", RequestError::kMalformedJson, ""},
      {R"({"model":"m"} trailing)", RequestError::kMalformedJson, ""},
      {"", RequestError::kMalformedJson, ""},
  };
  for (const auto& c : cases) {
    const auto e = parse_err(Endpoint::kChat, c.body);
    EXPECT_EQ(e.code, c.code) << c.body << " -> " << e.message;
    const ApiError api = to_api_error(e);
    EXPECT_EQ(api.status, 400) << c.body;
    EXPECT_EQ(api.type, "invalid_request_error") << c.body;
    EXPECT_EQ(api.param, c.param) << c.body << " -> " << e.message;
    EXPECT_FALSE(api.message.empty());
  }
}

TEST(Canonical, empty_messages_error_reads_like_openai) {
  const auto e = parse_err(Endpoint::kChat, R"({"model":"m","messages":[]})");
  EXPECT_EQ(e.message, "'messages' must be a non-empty array");
  EXPECT_EQ(to_api_error(e).param, "messages");
}

TEST(Canonical, body_over_the_limit_is_413) {
  RequestLimits limits;
  limits.max_body_bytes = 100;
  const std::string body =
      json{{"model", "m"}, {"messages", {{{"role", "user"}, {"content", std::string(200, 'x')}}}}}.dump();
  const auto e = parse_err(Endpoint::kChat, body, limits);
  EXPECT_EQ(e.code, RequestError::kTooLarge);
  EXPECT_EQ(to_api_error(e).status, 413);
}

std::string nested_arrays(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(Canonical, nesting_is_bounded_by_max_json_depth) {
  RequestLimits limits;
  limits.max_json_depth = 8;
  // The top-level object is level 1, so the tools value may nest 7 levels.
  const auto body = [](size_t d) {
    return R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":)" + nested_arrays(d) + "}";
  };
  EXPECT_TRUE(parse_openai_request(Endpoint::kChat, body(7), limits).ok());
  const auto e = parse_err(Endpoint::kChat, body(8), limits);
  EXPECT_EQ(e.code, RequestError::kTooDeep);
  EXPECT_EQ(to_api_error(e).status, 400);
  // The default bound holds against a deeply nested body.
  EXPECT_EQ(parse_err(Endpoint::kChat, R"({"model":"m","x":)" + nested_arrays(100000) + "}").code,
            RequestError::kTooDeep);
  // Limits can change between calls on the same thread.
  EXPECT_TRUE(parse_openai_request(Endpoint::kChat, body(20)).ok());
}

TEST(Canonical, counts_are_bounded) {
  RequestLimits limits;
  limits.max_messages = 3;
  limits.max_content_parts = 2;
  limits.max_tool_calls = 1;
  limits.max_tools = 1;
  limits.max_prompts = 2;
  limits.max_prompt_tokens = 3;
  json four = json::array();
  for (int i = 0; i < 4; ++i) {
    four.push_back({{"role", "user"}, {"content", "x"}});
  }
  EXPECT_EQ(parse_err(Endpoint::kChat, json{{"model", "m"}, {"messages", four}}.dump(), limits).code,
            RequestError::kTooManyMessages);
  four.erase(3);
  EXPECT_TRUE(
      parse_openai_request(Endpoint::kChat, json{{"model", "m"}, {"messages", four}}.dump(), limits).ok());
  EXPECT_EQ(parse_err(Endpoint::kChat,
                      R"({"model":"m","messages":[{"role":"user","content":["a","b","c"]}]})", limits)
                .code,
            RequestError::kTooManyItems);
  EXPECT_EQ(
      parse_err(
          Endpoint::kChat,
          R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"a"}},{"function":{"name":"b"}}]}]})",
          limits)
          .code,
      RequestError::kTooManyItems);
  EXPECT_EQ(parse_err(Endpoint::kChat,
                      R"({"model":"m","tools":[{},{}],"messages":[{"role":"user","content":"x"}]})", limits)
                .code,
            RequestError::kTooManyItems);
  EXPECT_EQ(parse_err(Endpoint::kCompletions, R"({"model":"m","prompt":["a","b","c"]})", limits).code,
            RequestError::kTooManyItems);
  EXPECT_EQ(parse_err(Endpoint::kCompletions, R"({"model":"m","prompt":[1,2,3,4]})", limits).code,
            RequestError::kTooManyItems);
}

// --- multi-turn ----------------------------------------------------------------

// A conversation grows by appending; with the reply appended via
// append_assistant_message, the post-generation digests of turn N are a
// prefix of what turn N+1 computes from its own body.
TEST(Digest, turn_n_digests_are_prefix_of_turn_n_plus_1) {
  json messages = json::array({{{"role", "system"}, {"content", std::string(300, 'S')}}});
  std::vector<Digest> previous_post;
  for (int turn = 0; turn < 6; ++turn) {
    messages.push_back(
        {{"role", "user"}, {"content", "question " + std::to_string(turn) + std::string(97, 'u')}});
    const auto req = parse_ok(Endpoint::kChat, json{{"model", "m"}, {"messages", messages}}.dump());
    const auto pre = digests_of(req);
    EXPECT_TRUE(is_prefix(previous_post, pre)) << "turn " << turn;

    const std::string reply = "answer " + std::to_string(turn) + std::string(150, 'a');
    std::string post_canonical = req.canonical_prompt;
    append_assistant_message(post_canonical, reply, {});
    std::vector<Digest> post;
    compute_prefix_digests(make_digest_seed(digest_seed_fields(req)), post_canonical, 64, post);
    EXPECT_TRUE(is_prefix(pre, post));
    EXPECT_GT(post.size(), pre.size());
    previous_post = post;
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
}

// The reply of a real vLLM server with a tool call (and content ""), appended
// via append_assistant_message, equals the canonical bytes of the same
// message as a client sends it back, in full or trimmed form.
TEST(Canonical, vllm_tool_call_reply_round_trips_exactly_into_the_next_turn) {
  const std::string response =
      testing::read_file(testing::sample_path("vllm-chat-completion-tools-cached-tokens.json"));
  ASSERT_FALSE(response.empty());
  auto reply = parse_chat_completion_reply(response);
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  ASSERT_EQ(reply->tool_calls.size(), 1u);
  EXPECT_EQ(reply->tool_calls[0].name, "enregistrer_offre");
  EXPECT_EQ(reply->tool_calls[0].arguments, "{\"nature\": \"lieu\", \"places\": 14}");

  const json tools =
      json::array({{{"type", "function"},
                    {"function", {{"name", "enregistrer_offre"}, {"parameters", {{"type", "object"}}}}}}});
  json messages = json::array({{{"role", "system"}, {"content", "Tu es un assistant de saisie."}},
                               {{"role", "user"}, {"content", "Un lieu pour 14 personnes."}}});
  const auto turn_n =
      parse_ok(Endpoint::kChat,
               json{{"model", "swiss-ai/Apertus-v1.5-70B"}, {"tools", tools}, {"messages", messages}}.dump());
  std::string post = turn_n.canonical_prompt;
  append_assistant_message(post, reply->content, reply->tool_calls);

  const json sent_back_full = json::parse(response)["choices"][0]["message"];
  json sent_back_trimmed = {
      {"role", "assistant"}, {"content", nullptr}, {"tool_calls", sent_back_full["tool_calls"]}};
  for (const json& assistant : {sent_back_full, sent_back_trimmed}) {
    json next = messages;
    next.push_back(assistant);
    const auto exact =
        parse_ok(Endpoint::kChat,
                 json{{"model", "swiss-ai/Apertus-v1.5-70B"}, {"tools", tools}, {"messages", next}}.dump());
    EXPECT_EQ(exact.canonical_prompt, post) << assistant.dump();
    next.push_back({{"role", "tool"}, {"tool_call_id", "chatcmpl-tool-93d1091597c06cb2"}, {"content", "ok"}});
    const auto turn_n1 =
        parse_ok(Endpoint::kChat,
                 json{{"model", "swiss-ai/Apertus-v1.5-70B"}, {"tools", tools}, {"messages", next}}.dump());
    EXPECT_EQ(turn_n1.canonical_prompt.substr(0, post.size()), post);
    std::vector<Digest> post_digests;
    compute_prefix_digests(make_digest_seed(digest_seed_fields(turn_n)), post, 64, post_digests);
    EXPECT_TRUE(is_prefix(post_digests, digests_of(turn_n1)));
  }
}

TEST(Canonical, reply_parser_rejects_responses_without_a_message) {
  EXPECT_EQ(parse_chat_completion_reply(R"({"choices":[]})").error().code, RequestError::kMissingField);
  EXPECT_EQ(parse_chat_completion_reply(R"({"choices":[{"text":"x"}]})").error().code,
            RequestError::kMissingField);
  EXPECT_EQ(parse_chat_completion_reply("nope").error().code, RequestError::kMalformedJson);
  auto plain =
      parse_chat_completion_reply(R"({"choices":[{"message":{"role":"assistant","content":"hi"}}]})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->content, "hi");
  EXPECT_TRUE(plain->tool_calls.empty());
}

TEST(Canonical, kv_transfer_params_are_noticed_however_the_key_is_spelled) {
  const std::string base = R"({"model":"m","messages":[{"role":"user","content":"x"}])";
  for (const std::string& extra : {std::string(R"(,"kv_transfer_params":{"remote_host":"h"}})"),
                                   std::string(R"(,"kv_transfer\u005fparams":{"remote_host":"h"}})"),
                                   std::string(R"(,"kv_transfer_params":null})"),
                                   std::string(R"(,"kv_transfer_params":1,"kv_transfer_params":null})")}) {
    auto r = parse_openai_request(Endpoint::kChat, base + extra);
    ASSERT_TRUE(r.ok()) << extra;
    EXPECT_TRUE(r->has_kv_transfer_params) << extra;
  }
  auto plain = parse_openai_request(Endpoint::kChat, base + R"(,"x":{"kv_transfer_params":1}})");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_kv_transfer_params);  // only the top level is a request field
  auto comp =
      parse_openai_request(Endpoint::kCompletions, R"({"model":"m","prompt":"p","kv_transfer_params":{}})");
  ASSERT_TRUE(comp.ok());
  EXPECT_TRUE(comp->has_kv_transfer_params);
}

}  // namespace
}  // namespace cgn
