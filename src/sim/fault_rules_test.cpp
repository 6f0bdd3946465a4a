#include "sim/fault_rules.h"

#include <gtest/gtest.h>

#include "testing/process.h"

namespace cgn::sim {
namespace {

TEST(FaultRules, first_matching_rule_wins_on_a_prompt_marker_or_a_request_id) {
  auto rules = FaultRules::parse(
      "# comment\n"
      "\n"
      "prompt:fail-503   error=503\n"
      "request_id:cgn-abc*  drop_after=3, stall=2s@1\n"
      "request_id:exact-id slow_start=250ms\n"
      "prompt:fail-503-too error=429\n",
      "rules.txt");
  ASSERT_TRUE(rules.ok()) << rules.error().message;
  EXPECT_EQ(rules->size(), 4u);
  const FaultPlan* p = rules->match("r1", R"({"prompt":"please fail-503-too"})");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->error_status, 503);  // the earlier rule's marker is a prefix of the later one's
  p = rules->match("cgn-abcdef", R"({"prompt":"x"})");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->drop_after_events, 3u);
  EXPECT_EQ(p->stall_after_events, 1u);
  EXPECT_EQ(rules->match("exact-id-2", "{}"), nullptr);  // an exact id is not a prefix
  ASSERT_NE(rules->match("exact-id", "{}"), nullptr);
  EXPECT_EQ(rules->match("exact-id", "{}")->slow_start, 250 * kNanosPerMilli);
  EXPECT_EQ(rules->match("other", R"({"prompt":"fine"})"), nullptr);
}

TEST(FaultRules, errors_name_the_file_and_the_line) {
  struct Case {
    const char* text;
    const char* message_start;
  };
  for (const Case& c : {
           Case{"prompt:x error=503\nbogus:y error=503\n", "r.txt:2: expected 'prompt:MARKER SPEC'"},
           Case{"\n\nprompt:x\n", "r.txt:3: no fault spec"},
           Case{"prompt:x error=404\n", "r.txt:1: fault item 'error=404'"},
           Case{"prompt:x refuse\n", "r.txt:1: fault item 'refuse' is only valid as a flag"},
           Case{"prompt:x rate=0.5\n", "r.txt:1: fault item 'rate' is only valid as a flag"},
           Case{"prompt: error=503\n", "r.txt:1: the marker or id must be 1..128 bytes"},
           Case{"prompt:a\"b error=503\n", "r.txt:1: the marker or id may hold only"},
           Case{"request_id:* error=503\n", "r.txt:1: the marker or id must be 1..128 bytes"},
           Case{"prompt:x drop_after=3,\n", nullptr},  // a trailing comma is fine
       }) {
    auto r = FaultRules::parse(c.text, "r.txt");
    if (c.message_start == nullptr) {
      EXPECT_TRUE(r.ok()) << c.text;
      continue;
    }
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(r.error().message.starts_with(c.message_start)) << r.error().message;
  }
}

TEST(FaultRules, bounds_hold) {
  std::string many;
  for (int i = 0; i <= 256; ++i) {
    many += "prompt:m" + std::to_string(i) + " error=503\n";
  }
  auto r = FaultRules::parse(many, "r.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "r.txt:257: more than 256 rules");
  EXPECT_FALSE(FaultRules::parse(std::string(70 * 1024, '#'), "r.txt").ok());
  auto long_line = FaultRules::parse("# " + std::string(3000, 'x') + "\n", "r.txt");
  ASSERT_FALSE(long_line.ok());
  EXPECT_EQ(long_line.error().message, "r.txt:1: line longer than 2048 bytes");
  EXPECT_FALSE(FaultRules::parse("prompt:" + std::string(129, 'm') + " error=503", "r.txt").ok());
}

TEST(FaultRules, load_file_reads_a_file_and_names_a_missing_one) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("rules"), "prompt:boom exit\r\n");  // CRLF is fine
  auto r = FaultRules::load_file(dir.file("rules"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_NE(r->match("", "boom"), nullptr);
  EXPECT_TRUE(r->match("", "boom")->exit_process);
  auto missing = FaultRules::load_file(dir.file("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "cannot read fault rules file " + dir.file("nope"));
}

}  // namespace
}  // namespace cgn::sim
