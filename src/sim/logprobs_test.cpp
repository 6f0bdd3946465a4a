#include "sim/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/faults.h"
#include "sim/openai_render.h"

namespace cgn::sim {
namespace {

using nlohmann::json;

LogprobsSpec spec(uint32_t top, double confidence = 0.9) {
  LogprobsSpec s;
  s.enabled = true;
  s.top = top;
  s.confidence = confidence;
  s.seed = 42;
  return s;
}

TEST(Logprobs, ParsesVllmsFieldsAndRefusesWhatVllmRefuses) {
  auto chat = parse_logprobs(json::parse(R"({"logprobs":true,"top_logprobs":3})"), true);
  ASSERT_TRUE(chat.ok());
  EXPECT_TRUE(chat->enabled);
  EXPECT_EQ(chat->top, 3u);
  auto off = parse_logprobs(json::parse(R"({"logprobs":false})"), true);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled);
  auto cmpl = parse_logprobs(json::parse(R"({"logprobs":2})"), false);
  ASSERT_TRUE(cmpl.ok());
  EXPECT_TRUE(cmpl->enabled);
  EXPECT_EQ(cmpl->top, 2u);
  auto top_only = parse_logprobs(json::parse(R"({"top_logprobs":2})"), true);
  ASSERT_FALSE(top_only.ok());
  EXPECT_EQ(top_only.error().message, "when using `top_logprobs`, `logprobs` must be set to true.");
  auto many = parse_logprobs(json::parse(R"({"logprobs":true,"top_logprobs":21})"), true);
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error().message, "Requested sample logprobs of 21, which is greater than max allowed: 20");
  EXPECT_FALSE(parse_logprobs(json::parse(R"({"logprobs":-1})"), false).ok());
  EXPECT_FALSE(parse_logprobs(json::parse(R"({"logprobs":"yes"})"), true).ok());
}

TEST(Logprobs, ChatEntriesHaveVllmsKeysAndTheConfidence) {
  const auto j = nlohmann::ordered_json::parse(render_chat_logprobs(spec(4, 0.25), {" the", " cat"}));
  ASSERT_EQ(j["content"].size(), 2u);
  const auto e = j["content"][1];
  std::vector<std::string> keys;
  for (auto it = e.begin(); it != e.end(); ++it)
    keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"token", "logprob", "bytes", "top_logprobs"}));
  EXPECT_EQ(e["token"], " cat");
  EXPECT_NEAR(std::exp(e["logprob"].get<double>()), 0.25, 1e-12);
  EXPECT_EQ(e["bytes"], json::array({32, 99, 97, 116}));
  ASSERT_EQ(e["top_logprobs"].size(), 4u);
  bool has_sampled = false;
  std::set<std::string> distinct;
  double prev = 1;
  for (const auto& t : e["top_logprobs"]) {
    distinct.insert(t["token"].get<std::string>());
    has_sampled = has_sampled || t["token"] == " cat";
    EXPECT_LT(t["logprob"].get<double>(), prev);
    prev = t["logprob"].get<double>();
  }
  EXPECT_EQ(distinct.size(), 4u);
  EXPECT_TRUE(has_sampled);
  // Certainty: alternatives at vLLM's -inf stand-in.
  const json sure = json::parse(render_chat_logprobs(spec(2, 1.0), {"x"}));
  EXPECT_EQ(sure["content"][0]["logprob"], 0.0);
  EXPECT_EQ(sure["content"][0]["top_logprobs"][1]["logprob"], -9999.0);
}

TEST(Logprobs, CompletionShapeAndOffsets) {
  const auto tokens = reply_tokens(" the cat sat");
  ASSERT_EQ(tokens.size(), 3u);
  const auto j = nlohmann::ordered_json::parse(render_completion_logprobs(spec(2), tokens));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it)
    keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"text_offset", "token_logprobs", "tokens", "top_logprobs"}));
  EXPECT_EQ(j["text_offset"], json::array({0, 4, 8}));
  EXPECT_EQ(j["tokens"], json::array({" the", " cat", " sat"}));
  EXPECT_NEAR(std::exp(j["token_logprobs"][2].get<double>()), 0.9, 1e-12);
  ASSERT_EQ(j["top_logprobs"][0].size(), 2u);
  EXPECT_TRUE(j["top_logprobs"][0].contains(" the"));
}

// A stream's per-chunk logprobs put together are the buffered answer's.
TEST(Logprobs, StreamedEntriesEqualTheBufferedOnes) {
  for (ApiKind kind : {ApiKind::kChat, ApiKind::kCompletion}) {
    ResponseMeta m{kind, "id-1", 1, "m"};
    m.logprobs = spec(3);
    SseStream s(m, false);
    json streamed_content = json::array();
    json streamed_tokens = json::array();
    json streamed_top = json::array();
    for (const char* t : {" the", " cat", " sat"}) {
      Event e;
      e.text = t;
      std::string out = s.on_token(e);
      const size_t at = out.rfind("data: ");
      const json chunk = json::parse(out.substr(at + 6));
      const json lp = chunk["choices"][0]["logprobs"];
      if (kind == ApiKind::kChat) {
        streamed_content.push_back(lp["content"][0]);
      } else {
        streamed_tokens.push_back(lp["tokens"][0]);
        streamed_top.push_back(lp["top_logprobs"][0]);
      }
    }
    Completion c;
    c.text = " the cat sat";
    const json buffered = json::parse(render_completion_body(m, c))["choices"][0]["logprobs"];
    if (kind == ApiKind::kChat) {
      EXPECT_EQ(streamed_content, buffered["content"]);
    } else {
      EXPECT_EQ(streamed_tokens, buffered["tokens"]);
      EXPECT_EQ(streamed_top, buffered["top_logprobs"]);
    }
  }
}

TEST(Logprobs, ConfidenceIsARuleItem) {
  auto p = parse_fault_spec("confidence=0.25", /*from_header=*/true);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->confidence, 0.25);
  EXPECT_EQ(merge_faults(FaultPlan{}, *p).confidence, 0.25);
  for (const char* bad : {"confidence=0", "confidence=1.5", "confidence=x", "confidence"}) {
    EXPECT_FALSE(parse_fault_spec(bad, true).ok()) << bad;
  }
}

}  // namespace
}  // namespace cgn::sim
