#include "sim/openai_render.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/json_schema_gen.h"
#include "sim/sim_testing.h"
#include "testing/process.h"

namespace cgn::sim {
namespace {

using nlohmann::json;

std::string read_sample(const std::string& name) {
  std::ifstream f(cgn::testing::sample_path(name));
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> data_lines(const std::string& sse) {
  std::vector<std::string> out;
  std::istringstream in(sse);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) == 0) {
      out.push_back(line.substr(6));
    }
  }
  return out;
}

// The shape of a JSON value: object keys in order (recursively), array element
// shapes, scalar types; values themselves do not matter.
json shape(const json& j) {
  if (j.is_object()) {
    json out = json::array();
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back({it.key(), shape(it.value())});
    }
    return out;
  }
  if (j.is_array()) {
    json out = json::array();
    for (const auto& e : j) {
      out.push_back(shape(e));
    }
    return {"array", out};
  }
  return j.type_name();
}

Event token(std::string text, bool last = false, FinishReason r = FinishReason::kStop) {
  Event e;
  e.text = std::move(text);
  e.last = last;
  e.finish_reason = r;
  return e;
}

ResponseMeta chat_meta() {
  return {ApiKind::kChat, "chatcmpl-f42e8ae7ddb346e1adfba47e3d710b46", 1760031300,
          "deepseek-ai/DeepSeek-V3.1"};
}

TEST(SseStream, ChunksHaveTheShapeOfTheVllmCapture) {
  const auto real = data_lines(read_sample("vllm-chat-stream.sse"));
  ASSERT_EQ(real.size(), 7u);  // role, 4 content, finish, [DONE]
  SseStream s(chat_meta(), false);
  std::string ours = s.on_token(token("Okay"));
  ours += s.on_token(token("."));
  ours += s.on_token(token(" Sure"));
  ours += s.on_token(token("."));
  ours += s.on_token(token("", true, FinishReason::kStop));
  Completion c;
  c.reason = FinishReason::kStop;
  ours += s.on_finished(c);
  const auto mine = data_lines(ours);
  ASSERT_EQ(mine.size(), real.size());
  for (size_t i = 0; i + 1 < real.size(); ++i) {
    EXPECT_EQ(shape(json::parse(mine[i])), shape(json::parse(real[i]))) << "chunk " << i << "\n" << mine[i];
  }
  // With the same ids and texts, the bytes are the capture's bytes.
  EXPECT_EQ(ours, read_sample("vllm-chat-stream.sse"));
}

TEST(SseStream, IncludeUsageAddsNullUsageAndAFinalUsageChunk) {
  SseStream s(chat_meta(), true);
  std::string out = s.on_token(token("Hi"));
  out += s.on_token(token(" there", true, FinishReason::kLength));
  Completion c;
  c.reason = FinishReason::kLength;
  c.usage = {46, 2, 32};
  out += s.on_finished(c);
  const auto lines = data_lines(out);
  ASSERT_EQ(lines.size(), 5u);
  for (size_t i = 0; i < 3; ++i) {
    const json j = json::parse(lines[i]);
    ASSERT_TRUE(j.contains("usage")) << lines[i];
    EXPECT_TRUE(j["usage"].is_null());
  }
  EXPECT_EQ(json::parse(lines[2])["choices"][0]["finish_reason"], "length");
  const json u = json::parse(lines[3]);
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["prompt_tokens"], 46);
  EXPECT_EQ(u["usage"]["completion_tokens"], 2);
  EXPECT_EQ(u["usage"]["total_tokens"], 48);
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 32);
  // The capture's usage keys are all present.
  const auto real = data_lines(read_sample("vllm-chat-stream-include-usage.sse"));
  const json real_usage = json::parse(real[real.size() - 2])["usage"];
  for (auto it = real_usage.begin(); it != real_usage.end(); ++it) {
    EXPECT_TRUE(u["usage"].contains(it.key())) << it.key();
  }
  EXPECT_EQ(lines[4], "[DONE]");
}

TEST(SseStream, FinishWithoutTokenEventsClosesTheChoice) {
  SseStream s({ApiKind::kCompletion, "cmpl-1", 1, "m"}, false);
  Completion c;
  c.reason = FinishReason::kLength;
  const auto lines = data_lines(s.on_finished(c));
  ASSERT_EQ(lines.size(), 2u);
  const json j = json::parse(lines[0]);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST(SseStream, MidStreamErrorThenDone) {
  SseStream s(chat_meta(), false);
  const auto lines = data_lines(s.on_error(Flavour::kVllm, 500, "engine died"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(json::parse(lines[0])["error"]["code"], 500);
  EXPECT_EQ(lines[1], "[DONE]");
}

TEST(CompletionBody, ChatBodyHasTheCaptureFieldsAndCachedTokens) {
  const json real = json::parse(read_sample("vllm-chat-completion-tools-cached-tokens.json"));
  Completion c;
  c.text = "hello \"world\"";
  c.usage = {122, 37, 32};
  const json ours = json::parse(
      render_completion_body({ApiKind::kChat, "chatcmpl-x", 1790881823, "swiss-ai/Apertus-v1.5-70B"}, c));
  for (auto it = ours.begin(); it != ours.end(); ++it) {
    EXPECT_TRUE(real.contains(it.key())) << it.key();
  }
  for (const char* key : {"id", "object", "created", "model", "choices", "usage", "kv_transfer_params"}) {
    EXPECT_TRUE(ours.contains(key)) << key;
  }
  for (auto it = ours["choices"][0]["message"].begin(); it != ours["choices"][0]["message"].end(); ++it) {
    EXPECT_TRUE(real["choices"][0]["message"].contains(it.key())) << it.key();
  }
  EXPECT_EQ(ours["object"], "chat.completion");
  EXPECT_EQ(ours["choices"][0]["message"]["content"], "hello \"world\"");
  EXPECT_EQ(ours["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(ours["usage"]["prompt_tokens_details"]["cached_tokens"], 32);
  EXPECT_EQ(ours["usage"]["total_tokens"], 159);
  EXPECT_TRUE(ours["kv_transfer_params"].is_null());
}

TEST(CompletionBody, PrefillAnswerCarriesIntegerBlockIds) {
  Completion c;
  c.reason = FinishReason::kLength;
  c.usage = {100, 1, 0};
  KvTransferParams p;
  p.do_remote_prefill = true;
  p.remote_block_ids = std::vector<int64_t>{7, 8, 9};
  p.remote_engine_id = "prefill-0";
  p.remote_request_id = "cmpl-abc";
  p.remote_host = "127.0.0.1";
  p.remote_port = 5600;
  c.kv_transfer_params = p;
  const json j = json::parse(render_completion_body({ApiKind::kCompletion, "cmpl-abc", 1, "m"}, c));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const json& kv = j["kv_transfer_params"];
  EXPECT_EQ(kv["do_remote_prefill"], true);
  EXPECT_EQ(kv["do_remote_decode"], false);
  EXPECT_EQ(kv["remote_block_ids"], json::array({7, 8, 9}));
  EXPECT_EQ(kv["remote_engine_id"], "prefill-0");
  EXPECT_EQ(kv["remote_request_id"], "cmpl-abc");
  EXPECT_EQ(kv["remote_host"], "127.0.0.1");
  EXPECT_EQ(kv["remote_port"], 5600);
  EXPECT_EQ(kv["tp_size"], 1);
  // And it parses back into the same params (the decode leg's input).
  auto back = parse_kv_transfer_params(kv.dump());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->complete_for_pull());
  EXPECT_EQ(*back->remote_block_ids, *p.remote_block_ids);
}

TEST(TimingHeaders, ReportModelledTimes) {
  Completion c;
  c.timing = {1'000'000'000, 1'250'000'000, 1'900'000'000, 2'500'000'000};
  c.usage.cached_tokens = 64;
  const auto h = timing_headers(c);
  std::map<std::string, std::string> m(h.begin(), h.end());
  EXPECT_EQ(m["X-Sim-Queue-Ms"], "250.000");
  EXPECT_EQ(m["X-Sim-Ttft-Ms"], "900.000");
  EXPECT_EQ(m["X-Sim-E2e-Ms"], "1500.000");
  EXPECT_EQ(m["X-Sim-Cached-Tokens"], "64");
  EXPECT_EQ(m.count("X-Sim-Transferred-Tokens"), 0u);
}

TEST(Embeddings, DeterministicUnitVectors) {
  const auto a = embedding_vector(encode("the same text"), 64);
  const auto b = embedding_vector(encode("the same text"), 64);
  const auto c = embedding_vector(encode("something else entirely"), 64);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double n = 0;
  for (float x : a) {
    n += static_cast<double>(x) * x;
  }
  EXPECT_NEAR(n, 1.0, 1e-5);
  const std::vector<std::vector<float>> vs = {a, c};
  const json j = json::parse(render_embeddings_body("embd-1", 5, "m", vs, 7, false));
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_EQ(j["data"][0]["embedding"].size(), 64u);
  EXPECT_NEAR(j["data"][0]["embedding"][3].get<double>(), a[3], 1e-6);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
  const json b64 = json::parse(render_embeddings_body("embd-1", 5, "m", vs, 7, true));
  EXPECT_EQ(b64["data"][0]["embedding"].get<std::string>().size(), (64u * 4u + 2u) / 3u * 4u);
}

TEST(KvTransferParams, ParsesTheRoutersPrefillRequestAndRejectsBadTypes) {
  auto req = parse_kv_transfer_params(
      R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null})");
  ASSERT_TRUE(req.ok());
  EXPECT_TRUE(req->do_remote_decode);
  EXPECT_FALSE(req->complete_for_pull());
  for (const char* bad : {"[1]", "{", R"({"remote_block_ids":["DUMMY_ID"]})", R"({"remote_port":"x"})",
                          R"({"remote_port":70000})", R"({"do_remote_decode":"yes"})", R"({"tp_size":0})"}) {
    EXPECT_FALSE(parse_kv_transfer_params(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace cgn::sim

namespace cgn::sim {
namespace {

// Drops the fields newer vLLM added to every chunk (the tool-call capture predates them).
std::string without_v1_fields(std::string s) {
  for (const std::string f : {R"(,"prompt_token_ids":null)", R"(,"token_ids":null)"}) {
    for (size_t p; (p = s.find(f)) != std::string::npos;) {
      s.erase(p, f.size());
    }
  }
  return s;
}

TEST(SseStream, ToolCallFragmentsAreTheVllmCaptureBytes) {
  ResponseMeta m{ApiKind::kChat, "chatcmpl-d0c68c86be0641129cffa5053c0c217e", 1744513664, ""};
  m.tool_calls.push_back(
      {"chatcmpl-tool-ca99dda515524c6abe47d1ea22813507", "run_command", R"({"command": "ls"})"});
  SseStream s(m, false);
  std::string ours = s.on_token(token(R"({"command": ")"));
  ours += s.on_token(token("ls"));
  ours += s.on_token(token("\"}\n"));
  ours += s.on_token(token("", true, FinishReason::kStop));
  Completion c;
  ours += s.on_finished(c);
  const auto real = data_lines(read_sample("vllm-chat-stream-tools.sse"));
  const auto mine = data_lines(without_v1_fields(ours));
  ASSERT_EQ(mine.size(), real.size()) << ours;
  for (size_t i = 0; i < real.size(); ++i) {
    EXPECT_EQ(mine[i], real[i]) << "chunk " << i;
  }
}

TEST(SseStream, ParallelToolCallsGetOneIndexEach) {
  ResponseMeta m = chat_meta();
  m.tool_calls.push_back({"chatcmpl-tool-a", "f", R"({"a": 1})"});
  m.tool_calls.push_back({"chatcmpl-tool-b", "g", R"({"b": 2})"});
  SseStream s(m, false);
  std::string out = s.on_token(token(R"({"a")"));
  out += s.on_token(token(": 1}\n"));
  out += s.on_token(token(R"({"b")"));
  out += s.on_token(token(": 2}\n"));
  out += s.on_token(token("", true, FinishReason::kStop));
  const auto lines = data_lines(out);
  ASSERT_EQ(lines.size(), 8u);  // role, (header, args, args) x 2, finish
  std::map<int, std::string> args;
  std::map<int, std::string> names;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    const json tc = json::parse(lines[i])["choices"][0]["delta"]["tool_calls"][0];
    const int idx = tc["index"];
    if (tc.contains("id")) {
      EXPECT_TRUE(args[idx].empty()) << "id and name come before the arguments";
      names[idx] = tc["function"]["name"];
    } else {
      args[idx] += tc["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(names[0], "f");
  EXPECT_EQ(names[1], "g");
  EXPECT_EQ(args[0], R"({"a": 1})");
  EXPECT_EQ(args[1], R"({"b": 2})");
  EXPECT_EQ(json::parse(lines.back())["choices"][0]["finish_reason"], "tool_calls");
}

TEST(RenderCompletionBody, ToolCallMessageIsTheVllmCaptureBytes) {
  const std::string real = read_sample("vllm-chat-completion-tools-cached-tokens.json");
  ResponseMeta m{ApiKind::kChat, "chatcmpl-98e5c916-349e-44a2-aac9-444f0b803878", 1790881823,
                 "swiss-ai/Apertus-v1.5-70B"};
  m.tool_calls.push_back({"chatcmpl-tool-93d1091597c06cb2", "enregistrer_offre", ""});
  Completion c;
  c.reason = FinishReason::kStop;
  c.text = "{\"nature\": \"lieu\", \"places\": 14}\n";
  c.usage = {122, 37, 32};
  const std::string ours = render_completion_body(m, c);
  const auto choice = [](const std::string& s) {
    const size_t b = s.find(R"("choices":)");
    const size_t e = s.find(R"("stop_reason":null)");
    return s.substr(b, e - b);
  };
  EXPECT_EQ(choice(ours), choice(real));
  EXPECT_EQ(json::parse(ours)["usage"]["total_tokens"], json::parse(real)["usage"]["total_tokens"]);
}

TEST(RenderCompletionBody, ToolCallCutByMaxTokensKeepsWhatWasGenerated) {
  ResponseMeta m = chat_meta();
  m.tool_calls.push_back({"chatcmpl-tool-a", "f", R"({"a": 1})"});
  m.tool_calls.push_back({"chatcmpl-tool-b", "g", R"({"b": 2})"});
  Completion c;
  c.reason = FinishReason::kLength;
  c.text = R"({"a")";
  const json j = json::parse(render_completion_body(m, c));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], R"({"a")");
}

TEST(RenderErrorBody, UnsupportedSchemaKeywordIsTheVllmCaptureBytes) {
  auto r = check_schema(json::parse(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, SchemaError::kUnsupported);
  EXPECT_EQ(render_error_body(Flavour::kVllm, 400, r.error().message), read_sample("vllm-error-400.json"));
}

}  // namespace
}  // namespace cgn::sim
