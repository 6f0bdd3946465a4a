#include "router/cascade/answer.h"

#include <gtest/gtest.h>

namespace cgn::router::cascade {
namespace {

using nlohmann::json;

const char* kChatAnswer = R"({"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"small",
  "choices":[{"index":0,"message":{"role":"assistant","content":"Hello world","tool_calls":[]},
  "logprobs":{"content":[{"token":"Hello","logprob":-0.1,"bytes":[72],"top_logprobs":[]},
                         {"token":" world","logprob":-0.3,"bytes":[32],"top_logprobs":[]}]},
  "finish_reason":"stop","stop_reason":null}],
  "usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}})";

TEST(CascadeAnswer, GatedBodyAsksForABufferedAnswerWithLogprobs) {
  auto b = read_client_body(
      R"({"model":"auto","stream":true,"stream_options":{"include_usage":true},"messages":[]})", true);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->ask.logprobs);
  EXPECT_TRUE(b->ask.include_usage);
  const json gated = json::parse(body_for(*b, "small", true));
  EXPECT_EQ(gated["model"], "small");
  EXPECT_EQ(gated["stream"], false);
  EXPECT_EQ(gated["logprobs"], true);
  EXPECT_FALSE(gated.contains("stream_options"));
  const json last = json::parse(body_for(*b, "large", false));
  EXPECT_EQ(last["model"], "large");
  EXPECT_EQ(last["stream"], true);
  EXPECT_TRUE(last["stream_options"]["include_usage"].get<bool>());
  EXPECT_FALSE(last.contains("logprobs"));
}

TEST(CascadeAnswer, CompletionsGatedBodyKeepsTheClientsLogprobsCount) {
  auto plain = read_client_body(R"({"model":"auto","prompt":"x"})", false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(json::parse(body_for(*plain, "s", true))["logprobs"], 0);
  auto asked = read_client_body(R"({"model":"auto","prompt":"x","logprobs":3})", false);
  ASSERT_TRUE(asked.ok());
  EXPECT_TRUE(asked->ask.logprobs);
  EXPECT_EQ(json::parse(body_for(*asked, "s", true))["logprobs"], 3);
}

TEST(CascadeAnswer, NotAnObjectIsAnError) {
  EXPECT_FALSE(read_client_body("[1]", true).ok());
  EXPECT_FALSE(read_answer("nope", true).ok());
  EXPECT_FALSE(read_answer(R"({"choices":[]})", true).ok());
}

TEST(CascadeAnswer, ReadsTokenLogprobsPerChoice) {
  auto a = read_answer(kChatAnswer, true);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->token_logprobs.size(), 1u);
  EXPECT_EQ(a->token_logprobs[0], (std::vector<double>{-0.1, -0.3}));
  auto c = read_answer(
      R"({"object":"text_completion","choices":[{"index":0,"text":"ab","logprobs":{"tokens":["a","b"],"token_logprobs":[-1.5,-0.5]}}]})",
      false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->token_logprobs[0], (std::vector<double>{-1.5, -0.5}));
}

TEST(CascadeAnswer, BufferedAnswerDropsLogprobsTheClientDidNotAskFor) {
  auto a = read_answer(kChatAnswer, true);
  ASSERT_TRUE(a.ok());
  const json plain = json::parse(buffered_for_client(*a, ClientAsk{true, false, false}));
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(plain["choices"][0]["message"]["content"], "Hello world");
  const json kept = json::parse(buffered_for_client(*a, ClientAsk{true, true, false}));
  EXPECT_EQ(kept["choices"][0]["logprobs"]["content"].size(), 2u);
}

TEST(CascadeAnswer, StreamIsOneChunkPerTokenThenFinishUsageAndDone) {
  auto a = read_answer(kChatAnswer, true);
  ASSERT_TRUE(a.ok());
  const auto events = stream_for_client(*a, ClientAsk{true, false, true});
  // role, "Hello", " world", finish, usage, [DONE]
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 1; i <= 2; ++i) {
    const json c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], "chatcmpl-1");
    EXPECT_TRUE(c["choices"][0]["logprobs"].is_null());
    text += c["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello world");
  EXPECT_EQ(json::parse(events[3])["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(json::parse(events[4])["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[5], "[DONE]");
  // Asked for logprobs: each token chunk carries its own entry.
  const auto with = stream_for_client(*a, ClientAsk{true, true, false});
  ASSERT_EQ(with.size(), 5u);
  EXPECT_EQ(json::parse(with[2])["choices"][0]["logprobs"]["content"][0]["token"], " world");
}

TEST(CascadeAnswer, WithoutTokensTheTextIsCutPerWord) {
  auto a = read_answer(
      R"({"id":"c","object":"text_completion","created":1,"model":"s","choices":[{"index":0,"text":"one two  three","logprobs":null,"finish_reason":"length"}]})",
      false);
  ASSERT_TRUE(a.ok());
  const auto events = stream_for_client(*a, ClientAsk{false, false, false});
  ASSERT_EQ(events.size(), 5u);  // "one ", "two  ", "three", finish, [DONE]
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], "one ");
  EXPECT_EQ(json::parse(events[1])["choices"][0]["text"], "two  ");
  EXPECT_EQ(json::parse(events[2])["choices"][0]["text"], "three");
  EXPECT_EQ(json::parse(events[3])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(events[0])["object"], "text_completion");
}

}  // namespace
}  // namespace cgn::router::cascade
