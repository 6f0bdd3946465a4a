#include "sim/image_tokens.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/openai_parse.h"
#include "sim/tokenizer.h"

namespace cgn::sim {
namespace {

using nlohmann::json;

json image(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

size_t prompt_tokens(const json& content) {
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", content}}})}};
  auto b = parse_generation_body(ApiKind::kChat, body.dump());
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return b.ok() ? to_engine_request(*b, ReplyMode::kRandom, 100000).prompt.size() : 0;
}

TEST(ImageTokens, EachImageIs576PromptTokens) {
  const size_t text = prompt_tokens("describe this");
  EXPECT_EQ(prompt_tokens(json::array(
                {image("data:image/png;base64,AAAA"), {{"type", "text"}, {"text", "describe this"}}})),
            text + kImageTokens);
  EXPECT_EQ(prompt_tokens(json::array({image("data:image/png;base64,AAAA"),
                                       image("https://example.com/cat.jpg"),
                                       {{"type", "text"}, {"text", "describe this"}}})),
            text + 2 * kImageTokens);
}

TEST(ImageTokens, SameImageSameTokensOtherImageOtherTokens) {
  std::string a, b, c;
  ASSERT_TRUE(append_image_placeholder(image("data:image/png;base64,AAAA"), a).ok());
  ASSERT_TRUE(append_image_placeholder(image("data:image/png;base64,AAAA"), b).ok());
  ASSERT_TRUE(append_image_placeholder(image("data:image/png;base64,AAAB"), c).ok());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(encode(a).size(), kImageTokens);
  std::string after_text = "look:";
  ASSERT_TRUE(append_image_placeholder(image("x"), after_text).ok());
  EXPECT_EQ(after_text.substr(0, 6), "look:\n");
}

TEST(ImageTokens, BadPartsAndTooManyImagesAreClearErrors) {
  for (const json& part : {json{{"type", "image_url"}}, json{{"type", "image_url"}, {"image_url", "u"}},
                           json{{"type", "image_url"}, {"image_url", {{"url", 3}}}},
                           json{{"type", "image_url"}, {"image_url", {{"url", ""}}}}}) {
    std::string out;
    auto r = append_image_placeholder(part, out);
    ASSERT_FALSE(r.ok()) << part;
    EXPECT_NE(r.error().message.find("image_url"), std::string::npos);
  }
  json many = json::array();
  for (int i = 0; i < 17; ++i)
    many.push_back(image(std::to_string(i)));
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", many}}})}};
  auto b = parse_generation_body(ApiKind::kChat, body.dump());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("16 images"), std::string::npos);
}

}  // namespace
}  // namespace cgn::sim
