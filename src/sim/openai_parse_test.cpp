#include "sim/openai_parse.h"

#include <gtest/gtest.h>

#include "sim/sim_testing.h"

namespace cgn::sim {
namespace {

TEST(ParseBody, ChatRequestBecomesATokenisedEngineRequest) {
  auto b = parse_generation_body(ApiKind::kChat, R"({
    "model":"llama","stream":true,"stream_options":{"include_usage":true},"max_tokens":5,
    "max_completion_tokens":7,"seed":3,"ignore_eos":true,"temperature":0.2,
    "messages":[{"role":"system","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"hello "},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"there"}]}]})");
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->model, "llama");
  EXPECT_TRUE(b->stream);
  EXPECT_TRUE(b->include_usage);
  EXPECT_EQ(b->max_tokens, 7u);  // max_completion_tokens wins
  EXPECT_EQ(b->seed, 3u);
  ASSERT_EQ(b->messages.size(), 2u);
  // The image part is a line of 576 placeholder tokens (image_tokens.h) between the texts.
  const std::string& content = b->messages[1].content;
  ASSERT_EQ(content.size(), 6 + 1 + 576 * 4 + 5);
  EXPECT_EQ(content.substr(0, 7), "hello \n");
  EXPECT_EQ(content.substr(content.size() - 6), "\nthere");
  const Request r = to_engine_request(*b, ReplyMode::kEcho, 4000);
  EXPECT_EQ(r.prompt, encode(render_chat(b->messages)));
  EXPECT_EQ(r.echo_text, content);
  EXPECT_EQ(r.max_tokens, 7u);
  EXPECT_TRUE(r.want_token_events);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(ParseBody, CompletionPromptsAndDefaults) {
  auto text = parse_generation_body(ApiKind::kCompletion, R"({"model":"m","prompt":"abc def"})");
  ASSERT_TRUE(text.ok());
  const Request r = to_engine_request(*text, ReplyMode::kRandom, 100);
  EXPECT_EQ(r.prompt, encode("abc def"));
  EXPECT_EQ(r.max_tokens, 100u - r.prompt.size());  // vLLM: what is left of max_model_len
  auto ids = parse_generation_body(ApiKind::kCompletion, R"({"prompt":[1,2,3]})");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(to_engine_request(*ids, ReplyMode::kRandom, 100).prompt, (std::vector<TokenId>{1, 2, 3}));
  auto one = parse_generation_body(ApiKind::kCompletion, R"({"prompt":["x"]})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->prompt_text, "x");
}

TEST(ParseBody, PrefillLegCarriesKvTransferParams) {
  auto b = parse_generation_body(ApiKind::kCompletion, R"({"prompt":"p","max_tokens":1,"stream":false,
    "kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,
    "remote_block_ids":null,"remote_host":null,"remote_port":null}})");
  ASSERT_TRUE(b.ok()) << b.error().message;
  ASSERT_TRUE(b->kv_transfer.has_value());
  EXPECT_TRUE(b->kv_transfer->do_remote_decode);
}

TEST(ParseBody, BadBodiesNameTheField) {
  struct Case {
    ApiKind kind;
    std::string body;
    BodyError want;
    const char* field;
  };
  const std::vector<Case> cases = {
      {ApiKind::kChat, "{", BodyError::kInvalidJson, "JSON"},
      {ApiKind::kChat, "[]", BodyError::kInvalidJson, "object"},
      {ApiKind::kChat, R"({"messages":[]})", BodyError::kBadField, "messages"},
      {ApiKind::kChat, R"({"messages":[{"content":"x"}]})", BodyError::kBadField, "role"},
      {ApiKind::kChat, R"({"messages":[{"role":"user","content":5}]})", BodyError::kBadField, "content"},
      {ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", BodyError::kBadField,
       "max_tokens"},
      {ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", BodyError::kBadField,
       "stream"},
      {ApiKind::kChat,
       R"({"messages":[{"role":"user","content":"x"}],"kv_transfer_params":{"remote_port":"x"}})",
       BodyError::kBadField, "remote_port"},
      {ApiKind::kCompletion, R"({"model":"m"})", BodyError::kBadField, "prompt"},
      {ApiKind::kCompletion, R"({"prompt":[1,-2]})", BodyError::kBadField, "prompt"},
      {ApiKind::kCompletion, R"({"prompt":[999999]})", BodyError::kBadField, "prompt"},
  };
  for (const auto& c : cases) {
    auto b = parse_generation_body(c.kind, c.body);
    ASSERT_FALSE(b.ok()) << c.body;
    EXPECT_EQ(b.error().code, c.want) << c.body;
    EXPECT_NE(b.error().message.find(c.field), std::string::npos) << b.error().message;
  }
}

TEST(ParseBody, Embeddings) {
  auto one = parse_embeddings_body(R"({"model":"m","input":"hello"})");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->inputs.size(), 1u);
  EXPECT_EQ(one->inputs[0], encode("hello"));
  auto many = parse_embeddings_body(R"({"input":["a",[1,2]],"encoding_format":"base64","dimensions":8})");
  ASSERT_TRUE(many.ok()) << many.error().message;
  EXPECT_EQ(many->inputs.size(), 2u);
  EXPECT_TRUE(many->base64);
  EXPECT_EQ(many->dimensions, 8u);
  EXPECT_FALSE(parse_embeddings_body(R"({"input":[]})").ok());
  EXPECT_FALSE(parse_embeddings_body(R"({"input":{}})").ok());
  EXPECT_FALSE(parse_embeddings_body(R"({"input":"x","encoding_format":"hex"})").ok());
}

}  // namespace
}  // namespace cgn::sim
