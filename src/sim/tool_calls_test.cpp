#include "sim/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace cgn::sim {
namespace {

using nlohmann::json;

const char* kTools = R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
     "properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"]}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object",
     "properties":{"tz":{"type":"string"}},"required":["tz"]}}}])";

StructuredRequest parse(const std::string& extra) {
  auto r = parse_structured_request(json::parse(std::string(R"({"tools":)") + kTools + extra + "}"));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : StructuredRequest{};
}

std::vector<ChatMessage> user(std::string text) {
  return {{"user", std::move(text)}};
}

std::vector<std::string> names(const std::vector<ToolCall>& calls) {
  std::vector<std::string> out;
  for (const auto& c : calls)
    out.push_back(c.name);
  return out;
}

TEST(ToolCalls, AutoCallsTheToolsNamedInTheUserMessage) {
  const auto s = parse("");
  EXPECT_EQ(names(plan_tool_calls(s, user("use get_time please"), "r1")),
            std::vector<std::string>{"get_time"});
  EXPECT_EQ(names(plan_tool_calls(s, user("get_weather and get_time"), "r1")),
            (std::vector<std::string>{"get_weather", "get_time"}));
  EXPECT_EQ(names(plan_tool_calls(s, user("hello"), "r1")), std::vector<std::string>{"get_weather"});
}

TEST(ToolCalls, AutoAnswersTextAfterAToolResult) {
  const auto s = parse("");
  std::vector<ChatMessage> m = user("get_weather");
  m.push_back({"assistant", ""});
  m.push_back({"tool", "sunny"});
  EXPECT_TRUE(plan_tool_calls(s, m, "r1").empty());
  // required calls anyway, on the last user message
  EXPECT_EQ(names(plan_tool_calls(parse(R"(,"tool_choice":"required")"), m, "r1")),
            std::vector<std::string>{"get_weather"});
}

TEST(ToolCalls, NoneNamedAndParallelOff) {
  EXPECT_TRUE(plan_tool_calls(parse(R"(,"tool_choice":"none")"), user("get_time"), "r").empty());
  EXPECT_EQ(
      names(plan_tool_calls(parse(R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})"),
                            user("get_weather"), "r")),
      std::vector<std::string>{"get_time"});
  EXPECT_EQ(
      names(plan_tool_calls(parse(R"(,"parallel_tool_calls":false)"), user("get_weather get_time"), "r")),
      std::vector<std::string>{"get_weather"});
}

TEST(ToolCalls, ArgumentsValidateAndIdsAreStablePerRequest) {
  const auto calls = plan_tool_calls(parse(""), user("get_weather get_time"), "req-7");
  ASSERT_EQ(calls.size(), 2u);
  const json a = json::parse(calls[0].arguments);
  EXPECT_TRUE(a["city"].is_string());
  EXPECT_EQ(a["unit"], "c");
  EXPECT_EQ(calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_EQ(calls[0].id.size(), 30u);
  EXPECT_NE(calls[0].id, calls[1].id);
  EXPECT_EQ(plan_tool_calls(parse(""), user("get_weather get_time"), "req-7")[1].id, calls[1].id);
  EXPECT_EQ(tool_calls_reply_text(calls), calls[0].arguments + "\n" + calls[1].arguments + "\n");
}

TEST(ToolCalls, ToolsWithoutParametersGetAnEmptyObject) {
  for (const char* tools : {R"([{"type":"function","function":{"name":"f"}}])",
                            R"([{"type":"function","function":{"name":"f","parameters":{}}}])"}) {
    auto s = parse_structured_request(
        json::parse(std::string(R"({"tool_choice":"required","tools":)") + tools + "}"));
    ASSERT_TRUE(s.ok());
    const auto calls = plan_tool_calls(*s, user("hi"), "r");
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].arguments, "{}");
  }
}

TEST(ToolCalls, BadToolsAndChoicesAreClearErrors) {
  for (const char* body :
       {R"({"tools":{}})", R"({"tools":[{"type":"function"}]})",
        R"({"tools":[{"type":"function","function":{"name":""}}]})", R"({"tool_choice":"required"})",
        R"({"tools":[],"tool_choice":"auto"})",
        R"({"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"})",
        R"({"tools":[{"type":"function","function":{"name":"f"}}],
                               "tool_choice":{"type":"function","function":{"name":"g"}}})",
        R"({"parallel_tool_calls":1})", R"({"response_format":{"type":"yaml"}})",
        R"({"response_format":{"type":"json_schema"}})"}) {
    auto r = parse_structured_request(json::parse(body));
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code, ToolError::kBadField) << body;
  }
  auto named = parse_structured_request(json::parse(
      R"({"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})"));
  EXPECT_EQ(named.error().message, "Tool 'g' has not been passed in `tools`.");
}

TEST(ToolCalls, UnsupportedParameterKeywordIsVllmsGrammarError) {
  auto r = parse_structured_request(json::parse(
      R"({"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"array","uniqueItems":true}}}]})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ToolError::kUnsupportedSchema);
  EXPECT_EQ(r.error().message, R"(Grammar error: Unimplemented keys: ["uniqueItems"])");
}

TEST(ResponseFormat, JsonObjectAndJsonSchemaAnswers) {
  auto obj = parse_structured_request(json::parse(R"({"response_format":{"type":"json_object"}})"));
  ASSERT_TRUE(obj.ok());
  ASSERT_TRUE(obj->json_reply.has_value());
  EXPECT_TRUE(json::parse(*obj->json_reply).is_object());
  auto sch = parse_structured_request(json::parse(
      R"({"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":
          {"type":"object","properties":{"n":{"type":"integer","minimum":42}},"required":["n"],"additionalProperties":false}}}})"));
  ASSERT_TRUE(sch.ok());
  EXPECT_EQ(json::parse(*sch->json_reply)["n"], 42);
  auto text = parse_structured_request(json::parse(R"({"response_format":{"type":"text"}})"));
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->json_reply.has_value());
}

}  // namespace
}  // namespace cgn::sim
