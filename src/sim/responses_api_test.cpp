#include "sim/responses_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace cgn::sim {
namespace {

using nlohmann::json;

ResponsesBody parse_ok(std::string_view body) {
  auto r = parse_responses_body(body);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : ResponsesBody{};
}

std::string parse_err(std::string_view body) {
  auto r = parse_responses_body(body);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? "" : r.error().message;
}

TEST(ResponsesBody, StringInputIsOneUserMessage) {
  const ResponsesBody b = parse_ok(
      R"({"model":"m","input":"hello","instructions":"be brief","max_output_tokens":7,"stream":true,
          "store":false,"seed":3,"temperature":0,"top_p":0.5})");
  EXPECT_EQ(b.model, "m");
  ASSERT_EQ(b.input.size(), 1u);
  EXPECT_EQ(b.input[0].role, "user");
  EXPECT_EQ(b.input[0].content, "hello");
  EXPECT_EQ(b.instructions, "be brief");
  EXPECT_EQ(b.max_output_tokens, 7u);
  EXPECT_TRUE(b.stream);
  EXPECT_FALSE(b.store);
  EXPECT_EQ(b.seed, 3u);
  EXPECT_EQ(b.temperature, 0.0);
  EXPECT_EQ(b.top_p, 0.5);
  EXPECT_FALSE(b.has_tools);
  EXPECT_TRUE(parse_ok(R"({"input":"x"})").store);  // store defaults to true
}

TEST(ResponsesBody, MessageItemsWithPartsBecomeChatMessages) {
  const ResponsesBody b = parse_ok(R"({"input":[
      {"role":"developer","content":"rules"},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
      {"type":"reasoning","id":"rs_1","summary":[]},
      {"role":"assistant","content":[{"type":"output_text","text":"c"}]}]})");
  ASSERT_EQ(b.input.size(), 3u);
  EXPECT_EQ(b.input[0].role, "developer");
  EXPECT_EQ(b.input[0].content, "rules");
  EXPECT_EQ(b.input[1].content, "ab");
  EXPECT_EQ(b.input[2].role, "assistant");
  EXPECT_EQ(b.input[2].content, "c");
}

TEST(ResponsesBody, BadBodiesNameTheField) {
  EXPECT_EQ(parse_err("{"), "request body is not valid JSON");
  EXPECT_EQ(parse_err("[]"), "request body must be a JSON object");
  EXPECT_EQ(parse_err(R"({})"), "'input' is required");
  EXPECT_EQ(parse_err(R"({"input":3})"), "'input' must be a string or an array of items");
  EXPECT_EQ(parse_err(R"({"input":[{"role":"user","content":3}]})"),
            "'input[0].content' must be a string or an array of parts");
  EXPECT_EQ(parse_err(R"({"input":[{"content":"x"}]})"), "'input[0].role' must be a string");
  EXPECT_NE(parse_err(R"({"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]})")
                .find("'input[0].type' 'function_call' is not supported"),
            std::string::npos);
  EXPECT_EQ(parse_err(R"({"input":"x","previous_response_id":""})"),
            "'previous_response_id' must be a non-empty string");
  EXPECT_EQ(parse_err(R"({"input":"x","max_output_tokens":0})"),
            "'max_output_tokens' must be a positive integer");
  EXPECT_EQ(parse_err(R"({"input":"x","store":"yes"})"), "'store' must be a boolean");
  EXPECT_EQ(parse_err(R"({"input":"x","temperature":"hot"})"), "'temperature' must be a number");
  EXPECT_EQ(parse_err(R"({"input":"x","tools":{}})"), "'tools' must be an array");
  std::string many = R"({"input":[)";
  for (size_t i = 0; i <= kMaxMessages; ++i) {
    many += std::string(i ? "," : "") + R"({"role":"user","content":"x"})";
  }
  EXPECT_EQ(parse_err(many + "]}"), "'input' has more than 4096 items");
}

TEST(ResponsesBody, ToolsAreFlaggedForVllmsError) {
  EXPECT_TRUE(parse_ok(R"({"input":"x","tools":[{"type":"function","name":"f"}]})").has_tools);
  EXPECT_FALSE(parse_ok(R"({"input":"x","tools":[]})").has_tools);
}

TEST(ResponsesConversation, FollowUpAppendsPreviousConversationAndReply) {
  const ResponsesBody first = parse_ok(R"({"input":"hi","instructions":"sys"})");
  const auto turn1 = responses_conversation(first, nullptr);
  ASSERT_EQ(turn1.size(), 2u);
  EXPECT_EQ(turn1[0].role, "system");
  const StoredResponse stored{turn1, "hello back"};
  const ResponsesBody second = parse_ok(R"({"input":"again","previous_response_id":"resp_1"})");
  const auto turn2 = responses_conversation(second, &stored);
  ASSERT_EQ(turn2.size(), 4u);
  EXPECT_EQ(turn2[2].role, "assistant");
  EXPECT_EQ(turn2[2].content, "hello back");
  EXPECT_EQ(turn2[3].content, "again");
  // Turn two's prompt starts with turn one's prompt and reply: it reuses turn one's KV.
  std::vector<ChatMessage> with_reply = turn1;
  with_reply.push_back({"assistant", "hello back"});
  const std::string p2 = render_chat(turn2);
  const std::string p1 = render_chat(with_reply, false);
  EXPECT_EQ(p2.compare(0, p1.size(), p1), 0);
}

TEST(ResponseStore, EvictsOldestByCountAndBytes) {
  ResponseStore s(2, 1000);
  s.put("a", {{{"user", "1"}}, "x"});
  s.put("b", {{{"user", "2"}}, "y"});
  s.put("c", {{{"user", "3"}}, "z"});
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.find("a"), nullptr);
  ASSERT_NE(s.find("c"), nullptr);
  EXPECT_EQ(s.find("c")->output_text, "z");

  ResponseStore b(100, 100);
  b.put("a", {{}, std::string(60, 'x')});
  b.put("b", {{}, std::string(30, 'y')});
  b.put("c", {{}, std::string(30, 'z')});  // over 100 bytes with a: a goes
  EXPECT_EQ(b.find("a"), nullptr);
  EXPECT_NE(b.find("b"), nullptr);
  EXPECT_LE(b.bytes(), 100u);
  b.put("huge", {{}, std::string(200, 'h')});  // larger than the store: not kept, nothing evicted
  EXPECT_EQ(b.find("huge"), nullptr);
  EXPECT_NE(b.find("b"), nullptr);
  b.put("b", {{}, "again"});  // replacing an id keeps one entry
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(b.find("b")->output_text, "again");
}

TEST(ResponseIds, HexIdsDifferPerCounterAndSalt) {
  const std::string a = hex_id(1, 1);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, hex_id(1, 2));
  EXPECT_NE(a, hex_id(2, 1));
}

ResponseObjectMeta meta() {
  return ResponseObjectMeta{
      .id = "resp_1", .message_id = "msg_1", .created_at = 5, .model = "m", .max_output_tokens = 9};
}

Completion done(std::string text) {
  Completion c;
  c.text = std::move(text);
  c.usage = {.prompt_tokens = 10, .completion_tokens = 3, .cached_tokens = 8};
  return c;
}

TEST(ResponseObject, BufferedShapeAsVllm) {
  const Completion c = done("hi there");
  const json r = json::parse(render_response_object(meta(), &c));
  EXPECT_EQ(r["id"], "resp_1");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["max_output_tokens"], 9);
  EXPECT_TRUE(r["previous_response_id"].is_null());
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["id"], "msg_1");
  EXPECT_EQ(r["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "hi there");
  EXPECT_EQ(r["usage"]["input_tokens"], 10);
  EXPECT_EQ(r["usage"]["output_tokens"], 3);
  EXPECT_EQ(r["usage"]["total_tokens"], 13);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 8);
  // No text, no output item (vLLM adds the message only when there is content).
  const Completion empty = done("");
  EXPECT_TRUE(json::parse(render_response_object(meta(), &empty))["output"].empty());
  const json pending = json::parse(render_response_object(meta(), nullptr));
  EXPECT_EQ(pending["status"], "in_progress");
  EXPECT_TRUE(pending["usage"].is_null());
}

struct SseEvent {
  std::string type;
  json data;
};

std::vector<SseEvent> split(const std::string& bytes) {
  std::vector<SseEvent> out;
  std::istringstream in(bytes);
  std::string line;
  std::string type;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) {
      type = line.substr(7);
    } else if (line.rfind("data: ", 0) == 0) {
      out.push_back({type, json::parse(line.substr(6))});
    }
  }
  return out;
}

Event token(std::string text) {
  Event e;
  e.kind = EventKind::kToken;
  e.text = std::move(text);
  return e;
}

TEST(ResponsesSseStream, EventsInVllmsOrderWithSequenceNumbers) {
  int completed = 0;
  ResponsesSse s(meta(), "item1", [&](const Completion& c) {
    ++completed;
    EXPECT_EQ(c.text, "ab");
  });
  std::string bytes = s.on_token(token("a"));
  bytes += s.on_token(token("b"));
  bytes += s.on_finished(done("ab"));
  EXPECT_EQ(completed, 1);
  const auto events = split(bytes);
  const std::vector<std::string> want = {"response.created",           "response.in_progress",
                                         "response.output_item.added", "response.content_part.added",
                                         "response.output_text.delta", "response.output_text.delta",
                                         "response.output_text.done",  "response.content_part.done",
                                         "response.output_item.done",  "response.completed"};
  ASSERT_EQ(events.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(events[i].type, want[i]);
    EXPECT_EQ(events[i].data["type"], want[i]);
    EXPECT_EQ(events[i].data["sequence_number"], i);
  }
  EXPECT_EQ(s.chunks(), want.size());
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[2].data["item"]["id"], "item1");
  EXPECT_EQ(events[4].data["delta"], "a");
  EXPECT_EQ(events[5].data["delta"], "b");
  // content_index advances after every event, as vLLM's does.
  EXPECT_EQ(events[3].data["content_index"], 0);
  EXPECT_EQ(events[4].data["content_index"], 1);
  EXPECT_EQ(events[5].data["content_index"], 2);
  EXPECT_EQ(events[6].data["text"], "ab");
  EXPECT_EQ(events[8].data["item"]["content"][0]["text"], "ab");
  const json& final_response = events[9].data["response"];
  const Completion ab = done("ab");
  EXPECT_EQ(final_response, json::parse(render_response_object(meta(), &ab)));
  EXPECT_EQ(bytes.find("[DONE]"), std::string::npos);
}

TEST(ResponsesSseStream, ErrorAfterStartIsAnErrorEvent) {
  ResponsesSse s(meta(), "item1", nullptr);
  (void)s.on_token(token("a"));
  const auto events = split(s.on_error(Flavour::kVllm, 500, "boom"));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "error");
  EXPECT_EQ(events[0].data["message"], "boom");
  EXPECT_EQ(events[0].data["sequence_number"], 5);
}

}  // namespace
}  // namespace cgn::sim
