#include "core/openai_error.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cgn {
namespace {

using nlohmann::json;

// The body parsed back, so each test checks real JSON, not string shapes.
json parsed(const ApiError& e) {
  json j = json::parse(e.body(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not valid JSON: " << e.body();
  return j;
}

void expect_error(const ApiError& e, int status, const char* type, const json& param, const json& code,
                  const std::string& message) {
  EXPECT_EQ(e.status, status);
  json j = parsed(e);
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.size(), 1u);
  const json& err = j.at("error");
  ASSERT_EQ(err.size(), 4u) << e.body();
  EXPECT_EQ(err.at("message"), message);
  EXPECT_EQ(err.at("type"), type);
  EXPECT_EQ(err.at("param"), param);
  EXPECT_EQ(err.at("code"), code);
}

TEST(OpenAiError, EveryHelperHasItsStatusTypeAndCode) {
  expect_error(bad_request("m"), 400, "invalid_request_error", nullptr, nullptr, "m");
  expect_error(bad_request("m", "messages", "too_many_messages"), 400, "invalid_request_error", "messages",
               "too_many_messages", "m");
  expect_error(unauthorized("m"), 401, "authentication_error", nullptr, "invalid_api_key", "m");
  expect_error(forbidden("m"), 403, "permission_error", nullptr, nullptr, "m");
  expect_error(not_found("m"), 404, "not_found_error", nullptr, nullptr, "m");
  expect_error(not_found("m", "model", "model_not_found"), 404, "not_found_error", "model", "model_not_found",
               "m");
  expect_error(method_not_allowed("m"), 405, "invalid_request_error", nullptr, nullptr, "m");
  expect_error(payload_too_large("m"), 413, "invalid_request_error", nullptr, "request_too_large", "m");
  expect_error(headers_too_large("m"), 431, "invalid_request_error", nullptr, "headers_too_large", "m");
  expect_error(unprocessable("m"), 422, "invalid_request_error", nullptr, nullptr, "m");
  expect_error(unprocessable("m", "max_tokens"), 422, "invalid_request_error", "max_tokens", nullptr, "m");
  expect_error(too_many_requests("m"), 429, "rate_limit_error", nullptr, "rate_limit_exceeded", "m");
  expect_error(too_many_requests("m", "queue_full"), 429, "rate_limit_error", nullptr, "queue_full", "m");
  expect_error(internal_error("m"), 500, "server_error", nullptr, nullptr, "m");
  expect_error(bad_gateway("m"), 502, "server_error", nullptr, "upstream_error", "m");
  expect_error(service_unavailable("m"), 503, "server_error", nullptr, nullptr, "m");
  expect_error(service_unavailable("m", "no_healthy_nodes"), 503, "server_error", nullptr, "no_healthy_nodes",
               "m");
  expect_error(gateway_timeout("m"), 504, "server_error", nullptr, "upstream_timeout", "m");
}

TEST(OpenAiError, BodyIsCompactAndFieldOrderIsFixed) {
  EXPECT_EQ(bad_request("bad \"x\"", "p").body(),
            R"({"error":{"message":"bad \"x\"","type":"invalid_request_error","param":"p","code":null}})");
}

TEST(OpenAiError, EscapesEverythingJsonNeeds) {
  std::string nasty = "quote\" backslash\\ nl\n cr\r tab\t nul";
  nasty += '\0';
  nasty += " bell\x07 del\x7f unicode é€😀 slash/";
  ApiError e = bad_request(nasty, "pa\"ram", "co\\de");
  expect_error(e, 400, "invalid_request_error", "pa\"ram", "co\\de", nasty);
  EXPECT_NE(e.body().find("\\u0000"), std::string::npos);
  EXPECT_NE(e.body().find("\\u0007"), std::string::npos);
}

TEST(OpenAiError, InvalidUtf8BecomesReplacementCharacters) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a\xff"
       "b",
       "a\xEF\xBF\xBD"
       "b"},                                                                     // never valid
      {"\xC3", "\xEF\xBF\xBD"},                                                  // truncated 2-byte sequence
      {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},                                  // overlong '/'
      {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},                  // UTF-16 surrogate
      {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},  // above U+10FFFF
      {"ok \xE2\x82\xAC", "ok \xE2\x82\xAC"},                                    // valid € passes through
  };
  for (const auto& [in, want] : cases) {
    json j = parsed(bad_request(in));
    EXPECT_EQ(j["error"]["message"], want);
  }
}

TEST(OpenAiError, AppendEscapedAppends) {
  std::string out = "prefix:";
  append_json_escaped(out, "a\"b");
  EXPECT_EQ(out, "prefix:a\\\"b");
}

}  // namespace
}  // namespace cgn
