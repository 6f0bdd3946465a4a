// cgn-config-doc's command (core/config_doc_cli.h) without a process: printing, usage, an
// unreadable file, and --check / --write on a real file.
#include "core/config_doc_cli.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/config_schema.h"
#include "testing/process.h"

namespace cgn::config {
namespace {

struct CommandRun {
  int status = -1;
  std::string out;
  std::string err;
};

CommandRun run(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  CommandRun r;
  r.status = run_config_doc_command(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(ConfigDocCommand, NoArgumentsPrintsEveryTable) {
  const CommandRun r = run({});
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const DocTable& t : reference_tables()) {
    EXPECT_NE(r.out.find("### `[" + t.path + "]`"), std::string::npos) << t.path;
  }
}

TEST(ConfigDocCommand, BadUsageAndUnreadableFileAreStatusTwo) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--check"}, {"--fix", "f"}, {"--write", "a", "b"}}) {
    const CommandRun r = run(args);
    EXPECT_EQ(r.status, 2) << args[0];
    EXPECT_EQ(r.err, "usage: cgn-config-doc [--check FILE | --write FILE]\n");
  }
  const CommandRun missing = run({"--check", "/nonexistent/configuration.md"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err, "cgn-config-doc: cannot read /nonexistent/configuration.md\n");
}

TEST(ConfigDocCommand, CheckFindsDriftAndWriteRepairsIt) {
  testing::TempDir dir;
  const std::string path = dir.file("configuration.md");
  std::string doc = "intro\n";
  for (const DocTable& t : reference_tables()) {
    doc += "<!-- BEGIN cgn-config-doc " + (t.path.empty() ? std::string("(top level)") : t.path) +
           " -->\nstale\n<!-- END cgn-config-doc -->\n";
  }
  testing::write_file(path, doc);
  const CommandRun drift = run({"--check", path});
  EXPECT_EQ(drift.status, 1);
  EXPECT_NE(drift.err.find("differs from the declarations"), std::string::npos) << drift.err;
  EXPECT_NE(drift.err.find("regenerate with:"), std::string::npos) << drift.err;

  EXPECT_EQ(run({"--write", path}).status, 0);
  const CommandRun clean = run({"--check", path});
  EXPECT_EQ(clean.status, 0) << clean.err;
  EXPECT_TRUE(clean.err.empty()) << clean.err;
  EXPECT_EQ(testing::read_file(path).rfind("intro\n", 0), 0U);
}

TEST(ConfigDocCommand, MissingBlocksFailBothModes) {
  testing::TempDir dir;
  const std::string path = dir.file("configuration.md");
  testing::write_file(path, "no blocks here\n");
  const CommandRun check = run({"--check", path});
  EXPECT_EQ(check.status, 1);
  EXPECT_NE(check.err.find("no generated block for"), std::string::npos) << check.err;
  EXPECT_EQ(run({"--write", path}).status, 1);
}

}  // namespace
}  // namespace cgn::config
