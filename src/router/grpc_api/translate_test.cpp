#include "router/grpc_api/translate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace cgn::router::grpc_api {
namespace {

namespace v1 = cognitora::v1;
using nlohmann::json;

v1::GenerateRequest chat(const std::string& text) {
  v1::GenerateRequest r;
  r.set_model("m");
  auto* m = r.add_messages();
  m->set_role("user");
  m->set_content(text);
  return r;
}

std::string header(const HttpCall& c, std::string_view name) {
  for (const auto& [k, v] : c.headers) {
    if (k == name) {
      return v;
    }
  }
  return {};
}

TEST(GrpcTranslate, ChatRequestCarriesSamplingExtensionsAndStreamsWithUsage) {
  auto r = chat("hi");
  r.set_max_tokens(12);
  r.set_temperature(0.5);
  r.set_top_p(0.9);
  r.add_stop()->push_back('\n');  // not add_stop(const char*): GCC 12 -Wrestrict false positive
  r.set_seed(7);
  r.set_priority("high");
  r.set_deadline_ms(5000);
  r.set_extensions_json(R"({"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto",)"
                        R"("response_format":{"type":"json_object"}})");
  auto call = to_http(r, 0);
  ASSERT_TRUE(call) << call.error().message;
  EXPECT_EQ(call->path, "/v1/chat/completions");
  auto b = json::parse(call->body);
  EXPECT_EQ(b["model"], "m");
  EXPECT_EQ(b["messages"][0]["content"], "hi");
  EXPECT_EQ(b["max_tokens"], 12);
  EXPECT_DOUBLE_EQ(b["temperature"].get<double>(), 0.5);
  EXPECT_EQ(b["stop"][0], "\n");
  EXPECT_EQ(b["seed"], 7);
  EXPECT_EQ(b["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(b["tool_choice"], "auto");
  EXPECT_EQ(b["response_format"]["type"], "json_object");
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_FALSE(b.contains("presence_penalty"));  // unset stays unset
  EXPECT_EQ(header(*call, "X-CGN-Priority"), "high");
  EXPECT_EQ(header(*call, "X-CGN-Deadline-Ms"), "5000");
}

TEST(GrpcTranslate, PromptIsACompletionAndTheSoonerDeadlineWins) {
  v1::GenerateRequest r;
  r.set_model("m");
  r.set_prompt("once");
  r.set_buffered(true);
  r.set_deadline_ms(5000);
  auto call = to_http(r, 1200);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->path, "/v1/completions");
  auto b = json::parse(call->body);
  EXPECT_EQ(b["prompt"], "once");
  EXPECT_FALSE(b.contains("stream"));
  EXPECT_EQ(header(*call, "X-CGN-Deadline-Ms"), "1200");
  EXPECT_EQ(header(*call, "X-CGN-Priority"), "");
}

TEST(GrpcTranslate, BadRequestsNameTheField) {
  v1::GenerateRequest none;
  none.set_model("m");
  EXPECT_FALSE(to_http(none, 0));
  auto both = chat("x");
  both.set_prompt("y");
  EXPECT_FALSE(to_http(both, 0));
  auto ext = chat("x");
  ext.set_extensions_json(R"({"stream":false})");
  auto e = to_http(ext, 0);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("'stream'"), std::string::npos);
  ext.set_extensions_json("[1]");
  EXPECT_FALSE(to_http(ext, 0));
  auto calls = chat("x");
  calls.mutable_messages(0)->set_tool_calls_json("{");
  e = to_http(calls, 0);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("messages[0].tool_calls_json"), std::string::npos);
}

TEST(GrpcTranslate, ChunksBecomeDeltas) {
  auto text = from_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]})");
  ASSERT_TRUE(text && *text);
  EXPECT_EQ((*text)->text(), "Hel");
  EXPECT_EQ((*text)->finish_reason(), "");

  auto tool = from_chunk(
      R"({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c1","function":{"name":"get","arguments":"{\"a\""}}]}}]})");
  ASSERT_TRUE(tool && *tool);
  ASSERT_EQ((*tool)->tool_calls_size(), 1);
  EXPECT_EQ((*tool)->tool_calls(0).index(), 1u);
  EXPECT_EQ((*tool)->tool_calls(0).id(), "c1");
  EXPECT_EQ((*tool)->tool_calls(0).name(), "get");
  EXPECT_EQ((*tool)->tool_calls(0).arguments(), R"({"a")");

  auto fin = from_chunk(R"({"choices":[{"delta":{},"finish_reason":"stop"}]})");
  ASSERT_TRUE(fin && *fin);
  EXPECT_EQ((*fin)->finish_reason(), "stop");

  auto usage =
      from_chunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}})");
  ASSERT_TRUE(usage && *usage);
  EXPECT_EQ((*usage)->usage().completion_tokens(), 4u);

  auto completion = from_chunk(R"({"choices":[{"text":"abc","finish_reason":null}]})");
  ASSERT_TRUE(completion && *completion);
  EXPECT_EQ((*completion)->text(), "abc");

  auto role_only = from_chunk(R"({"choices":[{"delta":{"role":"assistant"}}]})");
  ASSERT_TRUE(role_only);
  EXPECT_FALSE(*role_only);
  auto done = from_chunk("[DONE]");
  ASSERT_TRUE(done);
  EXPECT_FALSE(*done);

  auto err = from_chunk(R"({"error":{"message":"node went away"}})");
  ASSERT_FALSE(err);
  EXPECT_EQ(err.error().code, grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(err.error().message, "node went away");
  EXPECT_FALSE(from_chunk("not json"));
}

TEST(GrpcTranslate, BufferedBodyIsOneMessage) {
  auto chat_body = from_body(
      R"({"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function",)"
      R"("function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],)"
      R"("usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}})");
  ASSERT_TRUE(chat_body);
  EXPECT_EQ(chat_body->text(), "");
  ASSERT_EQ(chat_body->tool_calls_size(), 1);
  EXPECT_EQ(chat_body->tool_calls(0).name(), "f");
  EXPECT_EQ(chat_body->finish_reason(), "tool_calls");
  EXPECT_EQ(chat_body->usage().total_tokens(), 3u);
  auto text = from_body(R"({"choices":[{"text":"xyz","finish_reason":"length"}]})");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->text(), "xyz");
  EXPECT_FALSE(from_body("<html>"));
}

TEST(GrpcTranslate, HttpErrorsMapToGrpcCodes) {
  EXPECT_EQ(code_for_http(400), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code_for_http(401), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(code_for_http(403), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(code_for_http(404), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(code_for_http(429), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(code_for_http(503), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(code_for_http(504), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(code_for_http(500), grpc::StatusCode::INTERNAL);
  auto st = status_for_http(429, R"({"error":{"message":"queue full for model m","type":"x"}})");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(st.error_message(), "queue full for model m");
  EXPECT_EQ(
      status_for_http(429, R"({"error":{"message":"too late","code":"deadline_exceeded"}})").error_code(),
      grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status_for_http(502, "bad gateway").error_message(), "HTTP 502: bad gateway");
  EXPECT_EQ(code_name(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
}

TEST(GrpcTranslate, AGrpcPeerIsWrittenAsTheHttpServerWritesAClientAddress) {
  EXPECT_EQ(remote_of_peer("ipv4:10.1.2.3:4567"), "10.1.2.3:4567");
  EXPECT_EQ(remote_of_peer("ipv6:[::1]:4567"), "::1:4567");
  EXPECT_EQ(remote_of_peer("ipv6:%5B::1%5D:4567"), "::1:4567");
  EXPECT_EQ(remote_of_peer("unix:/run/x.sock"), "unix:/run/x.sock");
  EXPECT_EQ(remote_of_peer(""), "");
}

}  // namespace
}  // namespace cgn::router::grpc_api
