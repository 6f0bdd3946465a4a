#include "routing/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "testing/process.h"

namespace cgn::routing {
namespace {

std::string corpus(const std::string& name) {
  return cgn::testing::read_file(cgn::testing::source_path("tests/fuzz/corpus/prometheus/" + name));
}

TEST(PrometheusParser, ParsesNamesLabelsValuesAndTimestamps) {
  const std::string text =
      "# HELP a_total Some help, with \"quotes\".\n"
      "# TYPE a_total counter\n"
      "a_total 5\n"
      "b:c{x=\"1\", y = \"two\",} 1.5e+06 1700000000000\n"
      "d{esc=\"a\\\\b\\\"c\\nd\"} -0.25\n"
      "\n"
      "   e\t7\n";
  auto doc = parse_prometheus_text(text);
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  ASSERT_EQ(doc->samples.size(), 4u);
  EXPECT_EQ(doc->samples[0].name, "a_total");
  EXPECT_EQ(doc->samples[0].value, 5.0);
  EXPECT_TRUE(doc->samples[0].labels.empty());
  const auto& b = doc->samples[1];
  EXPECT_EQ(b.name, "b:c");
  ASSERT_EQ(b.labels.size(), 2u);
  EXPECT_EQ(*b.label("x"), "1");
  EXPECT_EQ(*b.label("y"), "two");
  EXPECT_EQ(b.label("z"), nullptr);
  EXPECT_EQ(b.value, 1.5e6);
  EXPECT_EQ(b.timestamp_ms, 1700000000000);
  EXPECT_EQ(*doc->samples[2].label("esc"), "a\\b\"c\nd");
  EXPECT_EQ(doc->samples[2].value, -0.25);
  EXPECT_EQ(doc->samples[3].name, "e");
  EXPECT_EQ(doc->samples[3].value, 7.0);
  ASSERT_EQ(doc->families.size(), 1u);
  EXPECT_EQ(doc->families[0].type, PromType::kCounter);
}

TEST(PrometheusParser, SpecialValuesCrlfAndEof) {
  auto doc = parse_prometheus_text("p +Inf\r\nn -Inf\r\nq NaN\r\n# EOF\r\nafter{ 1\n");
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  ASSERT_EQ(doc->samples.size(), 3u);
  EXPECT_TRUE(std::isinf(doc->samples[0].value) && doc->samples[0].value > 0);
  EXPECT_TRUE(std::isinf(doc->samples[1].value) && doc->samples[1].value < 0);
  EXPECT_TRUE(std::isnan(doc->samples[2].value));
}

TEST(PrometheusParser, MalformedLinesAreErrorsNamingTheLine) {
  struct C {
    std::string text;
    PromError code;
    std::string where;
  };
  const std::vector<C> cases = {
      {"ok 1\nnovalue\n", PromError::kSyntax, "line 2"},
      {"m{a=\"x} 1\n", PromError::kSyntax, "line 1"},
      {"m{a=x} 1\n", PromError::kSyntax, "line 1"},
      {"m{a=\"x\" b=\"y\"} 1\n", PromError::kSyntax, "line 1"},
      {"m 1 2 3\n", PromError::kSyntax, "line 1"},
      {"m 0x10\n", PromError::kSyntax, "line 1"},
      {"m 1 12.5\n", PromError::kSyntax, "line 1"},
      {"# TYPE m wobbly\n", PromError::kSyntax, "line 1"},
      {"{\"utf8.name\"} 1\n", PromError::kSyntax, "line 1"},
      {"1m 1\n", PromError::kSyntax, "line 1"},
      {"m{} \n", PromError::kSyntax, "line 1"},
  };
  for (const auto& c : cases) {
    auto doc = parse_prometheus_text(c.text);
    ASSERT_FALSE(doc.ok()) << c.text;
    EXPECT_EQ(doc.error().code, c.code) << c.text;
    EXPECT_NE(doc.error().message.find(c.where), std::string::npos) << doc.error().message;
  }
}

TEST(PrometheusParser, EveryLimitIsEnforced) {
  PromLimits l;
  l.max_bytes = 10;
  EXPECT_EQ(parse_prometheus_text("a 1\nb 2\nc 3\n", l).error().code, PromError::kTooLarge);
  l = {};
  l.max_lines = 2;
  EXPECT_EQ(parse_prometheus_text("a 1\nb 2\nc 3\n", l).error().code, PromError::kTooManyLines);
  l = {};
  l.max_line_bytes = 8;
  EXPECT_EQ(parse_prometheus_text("a 1\nbbbbbbbbbbbbbbbbbb 2\n", l).error().code, PromError::kLineTooLong);
  l = {};
  l.max_samples = 2;
  EXPECT_EQ(parse_prometheus_text("a 1\nb 2\nc 3\n", l).error().code, PromError::kTooManySamples);
  l = {};
  l.max_labels = 2;
  EXPECT_EQ(parse_prometheus_text("a{x=\"1\",y=\"2\",z=\"3\"} 1\n", l).error().code, PromError::kLimit);
  l = {};
  l.max_label_value_bytes = 4;
  EXPECT_EQ(parse_prometheus_text("a{x=\"12345\"} 1\n", l).error().code, PromError::kLimit);
  l = {};
  l.max_name_bytes = 4;
  EXPECT_EQ(parse_prometheus_text("abcdef 1\n", l).error().code, PromError::kLimit);
  EXPECT_EQ(parse_prometheus_text("a{abcdef=\"1\"} 1\n", l).error().code, PromError::kLimit);
}

TEST(PrometheusParser, ParsesEveryRecordedEnginePage) {
  struct C {
    std::string file;
    size_t min_samples;
  };
  for (const C& c : {C{"vllm-v1-metrics.txt", 300}, C{"vllm-v0-metrics-gpu-cache-usage.txt", 100},
                     C{"sglang-metrics.txt", 40}, C{"llamacpp-metrics.txt", 14},
                     C{"llamacpp-metrics-ik_llama-fork.txt", 10}}) {
    const std::string text = corpus(c.file);
    ASSERT_FALSE(text.empty()) << c.file;
    auto doc = parse_prometheus_text(text);
    ASSERT_TRUE(doc.ok()) << c.file << ": " << doc.error().message;
    EXPECT_GE(doc->samples.size(), c.min_samples) << c.file;
    EXPECT_FALSE(doc->families.empty()) << c.file;
  }
}

}  // namespace
}  // namespace cgn::routing
