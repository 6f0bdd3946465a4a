#include "sim/json_schema_gen.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace cgn::sim {
namespace {

using nlohmann::json;

json gen(const char* schema) {
  auto r = generate_json(json::parse(schema));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? json::parse(*r) : json();
}

TEST(JsonSchemaGen, ObjectWithRequiredTypedProperties) {
  const json v = gen(R"({"type":"object","properties":{
      "city":{"type":"string","minLength":5,"maxLength":8},
      "days":{"type":"integer","minimum":3,"maximum":9},
      "temp":{"type":"number","exclusiveMinimum":10},
      "unit":{"enum":["celsius","fahrenheit"]},
      "ok":{"type":"boolean"},
      "tags":{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":3},
      "note":{"type":["null","string"]},
      "kind":{"const":"weather"}},
    "required":["city","days","temp","unit","ok","tags","note","kind"],"additionalProperties":false})");
  ASSERT_TRUE(v.is_object());
  EXPECT_GE(v["city"].get<std::string>().size(), 5u);
  EXPECT_LE(v["city"].get<std::string>().size(), 8u);
  EXPECT_TRUE(v["days"].is_number_integer());
  EXPECT_GE(v["days"].get<int>(), 3);
  EXPECT_LE(v["days"].get<int>(), 9);
  EXPECT_GT(v["temp"].get<double>(), 10.0);
  EXPECT_EQ(v["unit"], "celsius");
  EXPECT_TRUE(v["ok"].is_boolean());
  ASSERT_TRUE(v["tags"].is_array());
  EXPECT_EQ(v["tags"].size(), 2u);
  EXPECT_TRUE(v["note"].is_string());
  EXPECT_EQ(v["kind"], "weather");
  EXPECT_EQ(v.size(), 8u);
}

TEST(JsonSchemaGen, PythonStyleSeparators) {
  auto r = generate_json(json::parse(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"integer"},"minItems":2}}})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, R"({"a": 1, "b": [1, 1]})");
}

TEST(JsonSchemaGen, RefsAnyOfAllOfAndFormats) {
  const json v = gen(R"({"$defs":{"Step":{"type":"object","properties":{"explanation":{"type":"string"},
      "output":{"type":"string","format":"date-time"}},"required":["explanation","output"]}},
    "type":"object","properties":{"steps":{"type":"array","items":{"$ref":"#/$defs/Step"}},
      "final":{"anyOf":[{"type":"integer","maximum":-4},{"type":"null"}]},
      "both":{"allOf":[{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
                      {"properties":{"y":{"type":"string"}},"required":["y"]}]}},
    "required":["steps","final","both"]})");
  ASSERT_EQ(v["steps"].size(), 1u);
  EXPECT_EQ(v["steps"][0]["output"], "2024-01-01T00:00:00Z");
  EXPECT_LE(v["final"].get<int>(), -4);
  EXPECT_TRUE(v["both"]["x"].is_number_integer());
  EXPECT_TRUE(v["both"]["y"].is_string());
}

TEST(JsonSchemaGen, RecursiveRefIsBounded) {
  auto r = generate_json(
      json::parse(R"({"type":"object","properties":{"child":{"$ref":"#"}},"required":["child"]})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, SchemaError::kTooLarge);
}

TEST(JsonSchemaGen, UnsupportedKeywordsAreListedOnceInOrder) {
  auto r = check_schema(json::parse(
      R"({"type":"object","properties":{"a":{"type":"string","pattern":"^x"},"b":{"type":"array","uniqueItems":true},
          "c":{"type":"string","pattern":"y"}},"description":"ignored","title":"t"})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, SchemaError::kUnsupported);
  EXPECT_EQ(r.error().message, R"(Grammar error: Unimplemented keys: ["pattern", "uniqueItems"])");
  auto f = check_schema(json::parse(R"({"type":"string","format":"ipv4"})"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message, R"(Grammar error: Unimplemented keys: ["format"])");
}

TEST(JsonSchemaGen, MalformedSchemasAreClearErrors) {
  for (const char* bad :
       {R"([])", R"({"enum":[]})", R"({"properties":[]})", R"({"type":"object","required":"a"})",
        R"({"type":"string","minLength":100000})", R"({"$ref":"#/$defs/missing"})", R"({"type":"wat"})",
        R"({"type":"object","properties":{"a":false},"required":["a"]})"}) {
    auto r = generate_json(json::parse(bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_FALSE(r.error().message.empty()) << bad;
  }
}

TEST(JsonSchemaGen, DeepNestingIsRefused) {
  std::string s;
  for (int i = 0; i < 40; ++i)
    s += R"({"type":"array","items":)";
  s += R"({"type":"integer"})";
  for (int i = 0; i < 40; ++i)
    s += "}";
  auto r = generate_json(json::parse(s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, SchemaError::kTooLarge);
}

}  // namespace
}  // namespace cgn::sim
