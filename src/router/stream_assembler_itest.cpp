// The stream assembler against the engine itself: the simulator (cgn-engine-sim, vLLM flavour)
// answers the same request buffered and streamed; the answer assembled from the stream must equal
// the buffered one. The request id is the same both times, so the simulator's ids (chat id, tool
// call ids) are too; only `created` (a clock) and null placeholders may differ.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "router/router_itest.h"
#include "router/stream_assembler.h"
#include "testing/engine_sim.h"

namespace cgn::router {
namespace {

using nlohmann::json;

// Drops null members (vLLM prints placeholders such as "refusal": null in a buffered answer that
// a stream never carries) and `created`.
json comparable(const json& j) {
  if (j.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : j.items()) {
      if (!v.is_null() && k != "created") {
        out[k] = comparable(v);
      }
    }
    return out;
  }
  if (j.is_array()) {
    json out = json::array();
    for (const auto& v : j) {
      out.push_back(comparable(v));
    }
    return out;
  }
  return j;
}

class AssemblerVsEngine : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GT(sim_.port(), 0) << sim_.log(); }

  // The buffered answer and the one assembled from the stream, for `request` (a chat body
  // without `stream`).
  std::pair<json, json> both(json request, const std::string& target = "/v1/chat/completions") {
    itest::Client cl(sim_.port());
    const itest::Headers id = {{"X-Request-Id", "assembler-" + std::to_string(++n_)}};
    const itest::Reply buffered = cl.post(target, request.dump(), id);
    EXPECT_EQ(buffered.status, 200u) << buffered.body;
    request["stream"] = true;
    request["stream_options"] = {{"include_usage", true}};
    const itest::Reply streamed = cl.stream(target, request.dump(), id);
    EXPECT_EQ(streamed.status, 200u) << streamed.body;
    StreamAssembler a;
    for (const auto& e : streamed.events) {
      auto s = a.add(e);
      EXPECT_TRUE(s.ok()) << s.error().message << " in " << e;
    }
    EXPECT_TRUE(a.done());
    auto body = a.finish();
    EXPECT_TRUE(body.ok());
    return {json::parse(buffered.body, nullptr, false), body.ok() ? json::parse(*body) : json()};
  }

  testing::EngineSim sim_{testing::EngineSimOptions{.model = "m", .args = {"--time-scale", "0.001"}}};
  int n_ = 0;
};

json weather_tools() {
  return json::parse(R"([
    {"type":"function","function":{"name":"weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["city","days"]}}},
    {"type":"function","function":{"name":"time","parameters":{"type":"object",
      "properties":{"zone":{"type":"string","enum":["UTC","CET"]}},"required":["zone"]}}}])");
}

TEST_F(AssemblerVsEngine, TextAnswer) {
  auto [buffered, assembled] = both(
      {{"model", "m"}, {"max_tokens", 12}, {"messages", {{{"role", "user"}, {"content", "Say hello"}}}}});
  ASSERT_FALSE(assembled["choices"][0]["message"]["content"].get<std::string>().empty());
  EXPECT_EQ(comparable(assembled), comparable(buffered));
}

TEST_F(AssemblerVsEngine, ParallelToolCalls) {
  auto [buffered, assembled] =
      both({{"model", "m"},
            {"tools", weather_tools()},
            {"tool_choice", "required"},
            {"messages", {{{"role", "user"}, {"content", "weather and time please"}}}}});
  ASSERT_EQ(assembled["choices"][0]["message"]["tool_calls"].size(), 2u) << assembled.dump();
  EXPECT_EQ(assembled["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(comparable(assembled), comparable(buffered));
}

TEST_F(AssemblerVsEngine, NamedToolCall) {
  auto [buffered, assembled] =
      both({{"model", "m"},
            {"tools", weather_tools()},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "time"}}}}},
            {"messages", {{{"role", "user"}, {"content", "what now"}}}}});
  ASSERT_EQ(assembled["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(assembled["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "time");
  EXPECT_EQ(comparable(assembled), comparable(buffered));
}

TEST_F(AssemblerVsEngine, JsonSchemaAnswer) {
  auto [buffered, assembled] =
      both({{"model", "m"},
            {"response_format",
             {{"type", "json_schema"},
              {"json_schema",
               {{"name", "p"},
                {"schema", json::parse(R"({"type":"object","properties":{"name":{"type":"string"},)"
                                       R"("age":{"type":"integer"}},"required":["name","age"]})")}}}}},
            {"messages", {{{"role", "user"}, {"content", "a person"}}}}});
  const json content =
      json::parse(assembled["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(content.is_object()) << assembled.dump();
  EXPECT_TRUE(content["age"].is_number_integer());
  EXPECT_EQ(comparable(assembled), comparable(buffered));
}

TEST_F(AssemblerVsEngine, ChatLogprobs) {
  auto [buffered, assembled] = both({{"model", "m"},
                                     {"max_tokens", 8},
                                     {"logprobs", true},
                                     {"top_logprobs", 2},
                                     {"messages", {{{"role", "user"}, {"content", "count to three"}}}}});
  const json& content = assembled["choices"][0]["logprobs"]["content"];
  ASSERT_TRUE(content.is_array()) << assembled.dump();
  ASSERT_FALSE(content.empty());
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(comparable(assembled), comparable(buffered));
}

TEST_F(AssemblerVsEngine, CompletionsTextAndLogprobs) {
  auto [buffered, assembled] =
      both({{"model", "m"}, {"max_tokens", 8}, {"logprobs", 2}, {"prompt", "Once upon a time"}},
           "/v1/completions");
  EXPECT_EQ(assembled["object"], "text_completion");
  ASSERT_FALSE(assembled["choices"][0]["text"].get<std::string>().empty());
  ASSERT_FALSE(assembled["choices"][0]["logprobs"]["tokens"].empty()) << assembled.dump();
  EXPECT_EQ(comparable(assembled), comparable(buffered));
}

}  // namespace
}  // namespace cgn::router
