#include "router/request_intake.h"

#include <gtest/gtest.h>

namespace cgn::router {
namespace {

ParsedRequest parsed(const std::string& model, const std::string& content) {
  const std::string body =
      R"({"model":")" + model + R"(","messages":[{"role":"user","content":")" + content + R"("}]})";
  auto pr = parse_openai_request(Endpoint::kChat, body);
  EXPECT_TRUE(static_cast<bool>(pr));
  return pr ? std::move(*pr) : ParsedRequest{};
}

TEST(RequestIntake, prefix_digests_are_those_of_a_request_for_the_model_they_are_computed_for) {
  const std::string content(2000, 'x');
  const ParsedRequest via_alias = parsed("auto", content);
  const ParsedRequest direct = parsed("small", content);
  const std::vector<Digest> for_small = prefix_digests(via_alias, "small", 256);
  ASSERT_FALSE(for_small.empty());
  EXPECT_EQ(for_small, prefix_digests(direct, direct.model, 256));
  // The seed names the model: the alias's digests share nothing with the step model's.
  const std::vector<Digest> for_alias = prefix_digests(via_alias, via_alias.model, 256);
  ASSERT_EQ(for_alias.size(), for_small.size());
  EXPECT_NE(for_alias.front(), for_small.front());
}

}  // namespace
}  // namespace cgn::router
