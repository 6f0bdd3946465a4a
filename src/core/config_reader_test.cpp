#include "core/config_reader.h"

#include <gtest/gtest.h>

#include <map>

namespace cgn::config {
namespace {

// A section as a module (say, a power source) would declare it.
enum class Source { nvml, rapl, static_watts };
struct Probe {
  std::string name;
  uint16_t port = 0;
};
struct PowerSection {
  Source source = Source::nvml;
  std::optional<uint32_t> poll_ms;
  int8_t offset = 0;
  uint64_t big = 0;
  std::vector<int32_t> ids;
  std::string label = "default";
  std::vector<Probe> probes;
  std::map<std::string, double> scale;
};

void read_power(TableReader& r, PowerSection& s) {
  r.get_enum("source", s.source,
             {{"nvml", Source::nvml}, {"rapl", Source::rapl}, {"static", Source::static_watts}});
  r.get("poll_ms", s.poll_ms, Range<uint32_t>{1, 1000});
  r.get("offset", s.offset);
  r.get("big", s.big);
  r.get("ids", s.ids, Range<int32_t>{-5, 5});
  r.require("label", s.label);
  r.tables("probes", [&](TableReader& t, size_t) {
    Probe p;
    t.require("name", p.name);
    t.get("port", p.port);
    s.probes.push_back(p);
  });
  r.table("scale", [&](TableReader& t) {
    t.named_tables([&](const std::string& name, TableReader& sub) { sub.require("factor", s.scale[name]); });
  });
}

struct Loaded {
  PowerSection section;
  std::vector<Diagnostic> diagnostics;
};

Loaded read(std::string_view text) {
  auto table = parse_toml(text, "p.toml");
  EXPECT_TRUE(table.ok()) << table.error().message;
  Loaded out;
  if (!table.ok()) {
    return out;
  }
  ConfigContext ctx("p.toml", [](std::string_view) { return std::nullopt; });
  TableReader root(ctx, table.value(), "");
  root.table("power", [&](TableReader& t) { read_power(t, out.section); });
  root.finish();
  out.diagnostics = ctx.diagnostics();
  return out;
}

std::string messages(const Loaded& l) {
  std::string out;
  for (const auto& d : l.diagnostics) {
    out += d.message + "\n";
  }
  return out;
}

TEST(TableReader, ReadsAModuleSectionWithEveryFieldKind) {
  Loaded l = read(R"(
[power]
source = "rapl"
poll_ms = 250
offset = -3
big = 9223372036854775807
ids = [-5, 0, 5]
label = "rack-1"
[[power.probes]]
name = "a"
port = 1234
[[power.probes]]
name = "b"
[power.scale.gpu]
factor = 1.5
[power.scale."cpu socket"]
factor = 2
)");
  ASSERT_TRUE(l.diagnostics.empty()) << messages(l);
  const PowerSection& s = l.section;
  EXPECT_EQ(s.source, Source::rapl);
  ASSERT_TRUE(s.poll_ms.has_value());
  EXPECT_EQ(*s.poll_ms, 250u);
  EXPECT_EQ(s.offset, -3);
  EXPECT_EQ(s.big, 9223372036854775807ull);
  EXPECT_EQ(s.ids, (std::vector<int32_t>{-5, 0, 5}));
  EXPECT_EQ(s.label, "rack-1");
  ASSERT_EQ(s.probes.size(), 2u);
  EXPECT_EQ(s.probes[0].port, 1234);
  EXPECT_EQ(s.probes[1].name, "b");
  EXPECT_EQ(s.probes[1].port, 0);
  EXPECT_DOUBLE_EQ(s.scale.at("gpu"), 1.5);
  EXPECT_DOUBLE_EQ(s.scale.at("cpu socket"), 2.0);
}

TEST(TableReader, AbsentOptionalStaysUnset) {
  Loaded l = read("[power]\nlabel = \"x\"\n");
  ASSERT_TRUE(l.diagnostics.empty()) << messages(l);
  EXPECT_FALSE(l.section.poll_ms.has_value());
  EXPECT_EQ(l.section.source, Source::nvml);
}

TEST(TableReader, IntegerBoundsComeFromTheFieldType) {
  Loaded l = read("[power]\nlabel = \"x\"\noffset = 200\n[[power.probes]]\nname = \"a\"\nport = 70000\n");
  ASSERT_EQ(l.diagnostics.size(), 2u);
  EXPECT_EQ(l.diagnostics[0].code, ConfigError::out_of_range);
  EXPECT_EQ(l.diagnostics[0].message,
            "p.toml:3:10: key 'power.offset' expected integer in [-128, 127], got 200");
  EXPECT_EQ(l.diagnostics[1].message,
            "p.toml:6:8: key 'power.probes[0].port' expected integer in [0, 65535], got 70000");
  EXPECT_EQ(l.section.offset, 0);  // untouched on error
}

TEST(TableReader, NegativeIntoUnsignedIsOutOfRange) {
  Loaded l = read("[power]\nlabel = \"x\"\nbig = -1\n");
  ASSERT_EQ(l.diagnostics.size(), 1u);
  EXPECT_EQ(l.diagnostics[0].message,
            "p.toml:3:7: key 'power.big' expected integer in [0, 9223372036854775807], got -1");
}

TEST(TableReader, RequiredKeysInNestedAndArrayTables) {
  Loaded l = read("[power]\n[[power.probes]]\nport = 1\n[power.scale.gpu]\n");
  ASSERT_EQ(l.diagnostics.size(), 3u) << messages(l);
  EXPECT_EQ(l.diagnostics[0].code, ConfigError::missing_key);
  EXPECT_EQ(l.diagnostics[0].message, "p.toml:1:1: missing required key 'power.label'");
  EXPECT_EQ(l.diagnostics[1].message, "p.toml:2:1: missing required key 'power.probes[0].name'");
  EXPECT_EQ(l.diagnostics[2].message, "p.toml:4:1: missing required key 'power.scale.gpu.factor'");
}

TEST(TableReader, EnumNamesTheChoices) {
  Loaded l = read("[power]\nlabel = \"x\"\nsource = \"ipmi\"\n");
  ASSERT_EQ(l.diagnostics.size(), 1u);
  EXPECT_EQ(l.diagnostics[0].code, ConfigError::bad_value);
  EXPECT_EQ(l.diagnostics[0].message,
            "p.toml:3:10: key 'power.source' expected one of nvml|rapl|static, got \"ipmi\"");
}

TEST(TableReader, ArrayOfTablesRejectsOtherElements) {
  Loaded l = read("[power]\nlabel = \"x\"\nprobes = [{ name = \"a\" }, 3]\n");
  ASSERT_EQ(l.diagnostics.size(), 1u) << messages(l);
  EXPECT_EQ(l.diagnostics[0].message, "p.toml:3:27: key 'power.probes[1]' expected table, got integer");
  EXPECT_EQ(l.section.probes.size(), 1u);
}

TEST(TableReader, UnknownKeysInInlineTablesAndNamedMaps) {
  Loaded l = read(
      "[power]\nlabel = \"x\"\nprobes = [{ name = \"a\", colour = \"red\" }]\n[power.scale.gpu]\nfactor = "
      "1\nfactr = 2\n");
  ASSERT_EQ(l.diagnostics.size(), 2u) << messages(l);
  EXPECT_EQ(l.diagnostics[0].message, "p.toml:3:25: unknown key 'power.probes[0].colour'");
  EXPECT_EQ(l.diagnostics[1].message, "p.toml:6:1: unknown key 'power.scale.gpu.factr'");
}

TEST(TableReader, FinishIsIdempotent) {
  auto table = parse_toml("x = 1\n", "t.toml");
  ASSERT_TRUE(table.ok());
  ConfigContext ctx("t.toml");
  TableReader r(ctx, table.value(), "");
  r.finish();
  r.finish();
  ASSERT_EQ(ctx.diagnostics().size(), 1u);
  EXPECT_EQ(ctx.to_error().message, "t.toml:1:1: unknown key 'x'");
  EXPECT_EQ(ctx.to_error().code, ConfigError::unknown_key);
}

TEST(TableReader, KeyPathsQuoteKeysThatAreNotBare) {
  auto table = parse_toml("", "t.toml");
  ASSERT_TRUE(table.ok());
  ConfigContext ctx("t.toml");
  TableReader r(ctx, table.value(), "models");
  EXPECT_EQ(r.key_path("llama"), "models.llama");
  EXPECT_EQ(r.key_path("a.b"), "models.\"a.b\"");
  EXPECT_EQ(r.key_path("q\"x"), "models.\"q\\\"x\"");
  EXPECT_EQ(r.key_path(""), "models.\"\"");
}

TEST(TableReader, ErrorCodesHaveNames) {
  EXPECT_EQ(to_string(ConfigError::missing_env), "missing_env");
  EXPECT_EQ(to_string(ConfigError::unknown_key), "unknown_key");
  EXPECT_EQ(toml_type_name(toml::value<double>(1.0)), "float");
}

}  // namespace
}  // namespace cgn::config
