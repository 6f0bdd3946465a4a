// The proxy's pure parts: stream delta accumulation and the digest chain of a completion.
#include "agent/agent_proxy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/digest.h"

namespace cgn::agent {
namespace {

TEST(StreamedReply, accumulates_content_and_tool_call_deltas) {
  StreamedReply r;
  r.add_event(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
  r.add_event(R"({"choices":[{"index":0,"delta":{"content":"Hel"}}]})");
  r.add_event(R"({"choices":[{"index":0,"delta":{"content":"lo"}}]})");
  r.add_event(
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"get","arguments":""}}]}}]})");
  r.add_event(
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]})");
  r.add_event(
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]})");
  r.add_event(R"({"choices":[],"usage":{"prompt_tokens":1}})");
  r.add_event("[DONE]");
  r.add_event("{not json");
  EXPECT_EQ(r.reply().content, "Hello");
  ASSERT_EQ(r.reply().tool_calls.size(), 1u);
  EXPECT_EQ(r.reply().tool_calls[0].name, "get");
  EXPECT_EQ(r.reply().tool_calls[0].arguments, "{\"a\":1}");
}

TEST(CompletionDigests, chat_with_reply_extends_the_request_chain) {
  const std::string text(1000, 'a');
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":")" + text + R"("}]})";
  const auto request = completion_digests("/v1/chat/completions", body, nullptr, 256);
  EXPECT_EQ(request.size(), 3u);  // "user" 0x1F + 1000 bytes + 0x1E = 1006 bytes: three full blocks
  AssistantReply reply;
  reply.content = std::string(600, 'b');
  const auto with_reply = completion_digests("/v1/chat/completions", body, &reply, 256);
  ASSERT_GT(with_reply.size(), request.size());
  EXPECT_TRUE(std::equal(request.begin(), request.end(), with_reply.begin()));
}

TEST(CompletionDigests, only_chat_and_completions_and_only_valid_bodies) {
  const std::string prompt(600, 'p');
  const std::string body = R"({"model":"m","prompt":")" + prompt + R"("})";
  EXPECT_EQ(completion_digests("/v1/completions", body, nullptr, 256).size(), 2u);
  EXPECT_TRUE(completion_digests("/v1/embeddings", body, nullptr, 256).empty());
  EXPECT_TRUE(completion_digests("/v1/completions", "{not json", nullptr, 256).empty());
  EXPECT_TRUE(completion_digests("/v1/completions", body, nullptr, 100).empty());  // invalid block size
}

TEST(AddCgnKvTransferParams, merges_without_overwriting_other_keys_and_bounds_the_lists) {
  Digest a{};
  a.fill(0xab);
  std::vector<Digest> many(kMaxKvTransferDigests + 5, a);
  auto out =
      add_cgn_kv_transfer_params(R"({"model":"m","kv_transfer_params":{"x":1,"cgn_prefix_digests":"old"}})",
                                 many, std::span(many).first(1));
  ASSERT_TRUE(out.has_value());
  const auto j = nlohmann::json::parse(*out);
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["kv_transfer_params"]["x"], 1);
  EXPECT_EQ(j["kv_transfer_params"]["cgn_prefix_digests"].size(), kMaxKvTransferDigests);
  EXPECT_EQ(j["kv_transfer_params"]["cgn_resident_digests"][0], to_hex(a));
  // Not an object: forwarded as it is.
  EXPECT_FALSE(add_cgn_kv_transfer_params("[1]", many, {}).has_value());
  EXPECT_FALSE(add_cgn_kv_transfer_params("{", many, {}).has_value());
  // A kv_transfer_params that is not an object is replaced.
  auto replaced = add_cgn_kv_transfer_params(R"({"kv_transfer_params":7})", std::span(many).first(1), {});
  ASSERT_TRUE(replaced.has_value());
  EXPECT_TRUE(nlohmann::json::parse(*replaced)["kv_transfer_params"]["cgn_resident_digests"].empty());
}

}  // namespace
}  // namespace cgn::agent
