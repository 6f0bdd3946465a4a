#include "router/stream_assembler.h"

#include <gtest/gtest.h>

#include "core/http/sse.h"
#include "testing/process.h"

namespace cgn::router {
namespace {

using nlohmann::json;

// Every event of an SSE text, in order (the parser the router's upstream streams use).
std::vector<std::string> events_of(std::string_view sse) {
  http::SseParser parser;
  EXPECT_TRUE(parser.feed(sse).ok());
  parser.finish();
  std::vector<std::string> out;
  http::SseEvent e;
  while (parser.pop(e)) {
    out.push_back(e.data);
  }
  return out;
}

json assemble(const std::vector<std::string>& events, AssemblerLimits limits = {}) {
  StreamAssembler a(limits);
  for (const auto& e : events) {
    auto s = a.add(e);
    EXPECT_TRUE(s.ok()) << s.error().message;
  }
  auto body = a.finish();
  EXPECT_TRUE(body.ok());
  return body.ok() ? json::parse(*body) : json();
}

std::string sample(const std::string& name) {
  return testing::read_file(testing::sample_path(name));
}

// The vLLM tool-call capture with the blank lines between its events put back (its source lost
// them; testdata/samples/README.md).
std::string tools_stream() {
  std::string text = sample("vllm-chat-stream-tools.sse");
  std::string out;
  for (size_t start = 0, end; start < text.size(); start = end + 1) {
    end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    out.append(text, start, end - start).append("\n\n");
  }
  return out;
}

// Drops null members, recursively: engines differ in which placeholders they print as null.
json without_nulls(const json& j) {
  if (j.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : j.items()) {
      if (!v.is_null()) {
        out[k] = without_nulls(v);
      }
    }
    return out;
  }
  if (j.is_array()) {
    json out = json::array();
    for (const auto& v : j) {
      out.push_back(without_nulls(v));
    }
    return out;
  }
  return j;
}

// Every member of `got` exists in `want` with the same JSON type, recursively (arrays: their first
// elements). The shape of a buffered answer, independent of its values.
void expect_same_shape(const json& got, const json& want, const std::string& path) {
  if (got.is_number() && want.is_number()) {
    return;
  }
  ASSERT_EQ(got.type_name(), std::string(want.type_name())) << path;
  if (got.is_object()) {
    for (const auto& [k, v] : got.items()) {
      ASSERT_TRUE(want.contains(k)) << path << "." << k << " is not in the engine's buffered answer";
      expect_same_shape(v, want[k], path + "." + k);
    }
  } else if (got.is_array() && !got.empty() && !want.empty()) {
    expect_same_shape(got[0], want[0], path + "[0]");
  }
}

TEST(StreamAssembler, VllmToolCallStreamBecomesVllmsBufferedToolAnswer) {
  const json got = assemble(events_of(tools_stream()));
  EXPECT_EQ(got["id"], "chatcmpl-d0c68c86be0641129cffa5053c0c217e");
  EXPECT_EQ(got["object"], "chat.completion");
  EXPECT_EQ(got["created"], 1744513664);
  ASSERT_EQ(got["choices"].size(), 1u);
  const json& choice = got["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], "");  // vLLM's buffered tool answer says "" too
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0],
            json::parse(R"({"id":"chatcmpl-tool-ca99dda515524c6abe47d1ea22813507","type":"function",)"
                        R"("function":{"name":"run_command","arguments":"{\"command\": \"ls\"}"}})"));
  // The buffered answer vLLM gives for a tool call has the same fields and types.
  const json buffered = json::parse(sample("vllm-chat-completion-tools-cached-tokens.json"));
  expect_same_shape(without_nulls(got), without_nulls(buffered), "$");
}

TEST(StreamAssembler, TextAndUsageFromAnIncludeUsageStream) {
  const std::vector<std::string> events = events_of(sample("vllm-chat-stream-include-usage.sse"));
  std::string text;
  for (const auto& e : events) {
    if (e == "[DONE]") {
      continue;
    }
    const json j = json::parse(e);
    if (!j["choices"].empty() && j["choices"][0]["delta"].contains("content")) {
      text += j["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  const json got = assemble(events);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(got["choices"][0]["message"]["content"], text);
  EXPECT_EQ(got["choices"][0]["message"]["tool_calls"], json::array());
  EXPECT_EQ(got["usage"], json::parse(R"({"prompt_tokens":46,"total_tokens":72,"completion_tokens":26})"));
  EXPECT_FALSE(got["choices"][0]["finish_reason"].is_null());
}

TEST(StreamAssembler, LlamaCppExtrasAreKept) {
  const json got = assemble(events_of(sample("llamacpp-chat-stream-usage-tail.sse")));
  EXPECT_EQ(got["system_fingerprint"], "b6097-9515c613");
  EXPECT_EQ(got["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(got["usage"]["completion_tokens"], 25);
}

std::string chunk(const std::string& choices, const std::string& extra = "") {
  return R"({"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[)" + choices +
         "]" + extra + "}";
}

TEST(StreamAssembler, ParallelToolCallsMergeByIndexInAnyInterleaving) {
  const json got = assemble({
      chunk(
          R"({"index":0,"delta":{"role":"assistant","tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":""}}]}})"),
      chunk(
          R"({"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f"}}]}})"),
      chunk(
          R"({"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"y\":"}},{"index":0,"function":{"arguments":"{\"x\""}}]}})"),
      chunk(R"({"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}})"),
      chunk(R"({"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"2}"}}]}})"),
      chunk(R"({"index":0,"delta":{},"finish_reason":"tool_calls","stop_reason":null})"),
      "[DONE]",
  });
  const json& calls = got["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0],
            json::parse(R"({"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}})"));
  EXPECT_EQ(calls[1],
            json::parse(R"({"id":"b","type":"function","function":{"name":"g","arguments":"{\"y\":2}"}})"));
  EXPECT_TRUE(got["choices"][0]["message"]["content"].is_null());  // no content fragment ever came
  EXPECT_EQ(got["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(got["choices"][0].contains("stop_reason"));
}

TEST(StreamAssembler, ChatLogprobsAndSeveralChoices) {
  const json got = assemble({
      chunk(
          R"({"index":1,"delta":{"role":"assistant","content":"B"},"logprobs":{"content":[{"token":"B","logprob":-0.5,"bytes":[66],"top_logprobs":[]}]}})"),
      chunk(
          R"({"index":0,"delta":{"role":"assistant","content":"A"},"logprobs":{"content":[{"token":"A","logprob":-0.1,"bytes":[65],"top_logprobs":[]}]}})"),
      chunk(
          R"({"index":0,"delta":{"content":"a","reasoning_content":"r1"},"logprobs":{"content":[{"token":"a","logprob":-0.2,"bytes":[97],"top_logprobs":[]}]},"finish_reason":"stop"})"),
      chunk(R"({"index":1,"delta":{"content":"b"},"logprobs":null,"finish_reason":"length"})"),
      chunk("", R"(,"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7})"),
      "[DONE]",
  });
  ASSERT_EQ(got["choices"].size(), 2u);
  EXPECT_EQ(got["choices"][0]["index"], 0);
  EXPECT_EQ(got["choices"][0]["message"]["content"], "Aa");
  EXPECT_EQ(got["choices"][0]["message"]["reasoning_content"], "r1");
  EXPECT_EQ(got["choices"][0]["logprobs"]["content"].size(), 2u);
  EXPECT_EQ(got["choices"][0]["logprobs"]["content"][1]["token"], "a");
  EXPECT_EQ(got["choices"][1]["message"]["content"], "Bb");
  EXPECT_EQ(got["choices"][1]["logprobs"]["content"].size(), 1u);
  EXPECT_EQ(got["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(got["usage"]["total_tokens"], 7);
}

TEST(StreamAssembler, CompletionsTextAndLogprobs) {
  auto c = [](const std::string& text, const std::string& lp, const std::string& finish) {
    return R"({"id":"cmpl-1","object":"text_completion","created":9,"model":"m","choices":[{"index":0,"text":")" +
           text + R"(","logprobs":)" + lp + R"(,"finish_reason":)" + finish + "}]}";
  };
  const json got = assemble({
      c("He", R"({"tokens":["He"],"token_logprobs":[-0.1],"top_logprobs":[{"He":-0.1}],"text_offset":[0]})",
        "null"),
      c("llo",
        R"({"tokens":["llo"],"token_logprobs":[-0.3],"top_logprobs":[{"llo":-0.3}],"text_offset":[2]})",
        R"("length")"),
      "[DONE]",
  });
  EXPECT_EQ(got["object"], "text_completion");
  EXPECT_EQ(got["choices"][0]["text"], "Hello");
  EXPECT_EQ(got["choices"][0]["logprobs"],
            json::parse(R"({"tokens":["He","llo"],"token_logprobs":[-0.1,-0.3],)"
                        R"("top_logprobs":[{"He":-0.1},{"llo":-0.3}],"text_offset":[0,2]})"));
  EXPECT_EQ(got["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(got["choices"][0].contains("message"));
}

TEST(StreamAssembler, EverySplitOfTheBytesGivesTheSameAnswer) {
  const std::string sse = tools_stream();
  const json whole = assemble(events_of(sse));
  for (size_t cut = 1; cut < sse.size(); cut += 7) {
    http::SseParser parser;
    StreamAssembler a;
    for (std::string_view part : {std::string_view(sse).substr(0, cut), std::string_view(sse).substr(cut)}) {
      ASSERT_TRUE(parser.feed(part).ok());
      http::SseEvent e;
      while (parser.pop(e)) {
        ASSERT_TRUE(a.add(e).ok());
      }
    }
    auto body = a.finish();
    ASSERT_TRUE(body.ok());
    EXPECT_EQ(json::parse(*body), whole) << "cut at " << cut;
  }
}

TEST(StreamAssembler, BadStreamsAreErrorsAndStaySo) {
  struct Case {
    std::vector<std::string> events;
    AssembleError want;
  };
  const std::vector<Case> cases = {
      {{"not json"}, AssembleError::kMalformedEvent},
      {{"[1,2]"}, AssembleError::kMalformedEvent},
      {{R"({"object":"embedding"})"}, AssembleError::kWrongObject},
      {{R"({"choices":[]})"}, AssembleError::kWrongObject},
      {{chunk(""), R"({"object":"text_completion","choices":[]})"}, AssembleError::kWrongObject},
      {{R"({"error":{"message":"engine died","code":500}})"}, AssembleError::kUpstreamError},
      {{chunk(R"({"delta":{"content":"x"}})")}, AssembleError::kTooManyItems},  // no index
      {{chunk(R"({"index":0,"delta":{"tool_calls":[{"function":{"arguments":"x"}}]}})")},
       AssembleError::kTooManyItems},
      {{chunk(R"({"index":0,"delta":{"tool_calls":[{"index":9999,"function":{}}]}})")},
       AssembleError::kTooManyItems},
      {{chunk(R"({"index":0,"delta":{"content":7}})")}, AssembleError::kMalformedEvent},
      {{chunk(R"({"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":{}}}]}})")},
       AssembleError::kMalformedEvent},
      {{chunk(R"({"index":0,"logprobs":[1]})")}, AssembleError::kMalformedEvent},
      {{chunk(R"({"index":0,"delta":{}})"), "[DONE]", chunk(R"({"index":0,"delta":{}})")},
       AssembleError::kAfterDone},
      {{std::string(100, '[') + std::string(100, ']')}, AssembleError::kTooLarge},
      {{}, AssembleError::kIncomplete},
  };
  for (const auto& c : cases) {
    StreamAssembler a;
    for (const auto& e : c.events) {
      (void)a.add(e);
    }
    auto body = a.finish();
    ASSERT_FALSE(body.ok()) << (c.events.empty() ? "" : c.events.back());
    EXPECT_EQ(body.error().code, c.want) << to_string(c.want) << ": " << body.error().message;
    if (c.want == AssembleError::kUpstreamError) {
      EXPECT_EQ(body.error().message, "engine died");
    }
  }
}

TEST(StreamAssembler, BoundedByTotalBytes) {
  AssemblerLimits limits;
  limits.max_total_bytes = 1000;
  StreamAssembler a(limits);
  const std::string e = chunk(R"({"index":0,"delta":{"content":")" + std::string(100, 'x') + R"("}})");
  size_t added = 0;
  while (a.add(e).ok()) {
    ++added;
    ASSERT_LT(added, 100u);
  }
  EXPECT_EQ(added, 1000 / e.size());
  EXPECT_EQ(a.finish().error().code, AssembleError::kTooLarge);
}

}  // namespace
}  // namespace cgn::router
