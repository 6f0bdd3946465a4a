#include "router/disagg.h"

#include <gtest/gtest.h>

namespace cgn::router::disagg {
namespace {

using nlohmann::json;

TEST(Disagg, PrefillBodyFollowsTheNixlProxyRewrite) {
  const std::string client =
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,)"
      R"("stream_options":{"include_usage":true},"max_tokens":200,"max_completion_tokens":200,)"
      R"("min_tokens":5,"min_completion_tokens":5,"temperature":0.5,"tools":[{"type":"function"}]})";
  auto b = prefill_body(client);
  ASSERT_TRUE(b.ok());
  const json j = json::parse(*b);
  EXPECT_EQ(j["max_tokens"], 1);
  EXPECT_EQ(j["max_completion_tokens"], 1);
  EXPECT_EQ(j["stream"], false);
  EXPECT_FALSE(j.contains("stream_options"));
  EXPECT_FALSE(j.contains("min_tokens"));
  EXPECT_FALSE(j.contains("min_completion_tokens"));
  EXPECT_EQ(j["kv_transfer_params"],
            json::parse(R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,)"
                        R"("remote_block_ids":null,"remote_host":null,"remote_port":null})"));
  // Everything else goes as the client sent it.
  EXPECT_EQ(j["temperature"], 0.5);
  EXPECT_EQ(j["tools"], json::parse(R"([{"type":"function"}])"));
  EXPECT_EQ(j["messages"][0]["content"], "hi");
}

TEST(Disagg, PrefillBodyAddsMaxTokensButNotMaxCompletionTokens) {
  auto b = prefill_body(R"({"model":"m","prompt":"x"})");
  ASSERT_TRUE(b.ok());
  const json j = json::parse(*b);
  EXPECT_EQ(j["max_tokens"], 1);
  EXPECT_FALSE(j.contains("max_completion_tokens"));
  EXPECT_EQ(j["stream"], false);
}

TEST(Disagg, PrefillBodyRefusesWhatIsNotAnObject) {
  for (const char* bad : {"", "[1,2]", "\"s\"", "{", "null"}) {
    auto b = prefill_body(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.error().code, DisaggError::kNotAnObject);
  }
}

TEST(Disagg, HandoffParamsOnlyFromANonEmptyObject) {
  const json params = {{"do_remote_prefill", true},
                       {"remote_block_ids", {1, 2, 3}},
                       {"remote_engine_id", "p"},
                       {"remote_request_id", "r"},
                       {"remote_host", "localhost"},
                       {"remote_port", 8100},
                       {"tp_size", 1}};
  const json answer = {{"choices", {{{"finish_reason", "length"}}}}, {"kv_transfer_params", params}};
  auto got = handoff_params(answer.dump());
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, params);
  // A stop token first: no params, or null, or an empty object.
  EXPECT_FALSE(handoff_params(R"({"choices":[{"finish_reason":"stop"}]})").has_value());
  EXPECT_FALSE(handoff_params(R"({"kv_transfer_params":null})").has_value());
  EXPECT_FALSE(handoff_params(R"({"kv_transfer_params":{}})").has_value());
  EXPECT_FALSE(handoff_params(R"({"kv_transfer_params":[1]})").has_value());
  EXPECT_FALSE(handoff_params("not json").has_value());
  EXPECT_FALSE(handoff_params("[]").has_value());
}

TEST(Disagg, DecodeBodyIsTheClientsWithTheParams) {
  const json params = {{"do_remote_prefill", true}, {"remote_engine_id", "p"}};
  const std::string client = R"({"model":"m","stream":true,"max_tokens":7,"kv_transfer_params":{"x":1}})";
  const json j = json::parse(decode_body(client, params));
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["max_tokens"], 7);
  EXPECT_EQ(j["kv_transfer_params"], params);  // the client's own params never reach decode
  EXPECT_EQ(decode_body("[1]", params), "[1]");
}

TEST(Disagg, DecodeCandidatesByLoadThenOverlap) {
  auto cand = [](routing::NodeIndex n, double load, uint32_t overlap) {
    routing::Candidate c;
    c.node = n;
    c.load = load;
    c.overlap_blocks = overlap;
    return c;
  };
  std::vector<routing::Candidate> r = {cand(0, 3, 50), cand(1, 1, 0), cand(2, 1, 9), cand(3, 0, 0),
                                       cand(4, 1, 9)};
  routing::order_for_decode(r);
  std::vector<routing::NodeIndex> order;
  for (const auto& c : r) {
    order.push_back(c.node);
  }
  EXPECT_EQ(order, (std::vector<routing::NodeIndex>{3, 2, 4, 1, 0}));
}

}  // namespace
}  // namespace cgn::router::disagg
