#include "sim/shell_api.h"

#include <gtest/gtest.h>

#include "sim/tokenizer.h"

namespace cgn::sim {
namespace {

TEST(ShellApi, ClaimBodyRoundTrips) {
  const ClaimRequest c{"sim-vllm-8100", "req-1", {7, 8, 9}};
  auto back = parse_claim_body(render_claim_body(c));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->engine_id, "sim-vllm-8100");
  EXPECT_EQ(back->request_id, "req-1");
  EXPECT_EQ(back->block_ids, (std::vector<int64_t>{7, 8, 9}));
}

TEST(ShellApi, BadClaimBodiesNameTheField) {
  EXPECT_EQ(parse_claim_body("nope").error().code, BodyError::kInvalidJson);
  auto no_ids = parse_claim_body(R"({"engine_id":"e","request_id":"r"})");
  ASSERT_FALSE(no_ids.ok());
  EXPECT_NE(no_ids.error().message.find("block_ids"), std::string::npos);
  auto bad_id = parse_claim_body(R"({"engine_id":"e","request_id":"r","block_ids":["x"]})");
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.error().message.find("block_ids"), std::string::npos);
  const std::string long_id(600, 'a');
  EXPECT_FALSE(
      parse_claim_body(R"({"engine_id":"e","request_id":")" + long_id + R"(","block_ids":[]})").ok());
}

TEST(ShellApi, ClaimAnswersRoundTripAndUnreadableMeansUnknown) {
  for (ClaimStatus s :
       {ClaimStatus::kOk, ClaimStatus::kExpired, ClaimStatus::kUnknown, ClaimStatus::kMismatch}) {
    EXPECT_EQ(parse_claim_answer(render_claim_answer(s)), s);
  }
  EXPECT_EQ(parse_claim_answer("<html>"), ClaimStatus::kUnknown);
  EXPECT_EQ(parse_claim_answer(R"({"status":"fine"})"), ClaimStatus::kUnknown);
}

TEST(ShellApi, EvictBodySelectsAllOrThePromptsTokens) {
  auto all = parse_evict_body(R"({"all":true})");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->all);

  auto prompt = parse_evict_body(R"({"prompt":"hello world\n"})");
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_FALSE(prompt->all);
  EXPECT_EQ(prompt->prefix, encode("hello world\n"));

  // Chat messages tokenise exactly as a chat request's prompt.
  auto chat = parse_evict_body(R"({"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  const std::vector<ChatMessage> msgs = {{"user", "hi"}};
  EXPECT_EQ(chat->prefix, encode(render_chat(msgs)));

  EXPECT_FALSE(parse_evict_body(R"({"all":"yes"})").ok());
  EXPECT_FALSE(parse_evict_body(R"({"prompt":""})").ok());
  EXPECT_FALSE(parse_evict_body(R"({})").ok());
  EXPECT_FALSE(parse_evict_body(R"({"messages":[]})").ok());
}

}  // namespace
}  // namespace cgn::sim
