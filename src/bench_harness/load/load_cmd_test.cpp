#include "bench_harness/load/load_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cgn::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CliResult<LoadCommandOptions> parse(std::vector<std::string> args) {
  std::vector<const char*> argv;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  return parse_load_options(static_cast<int>(argv.size()), argv.data());
}

TEST(LoadOptions, HelpNamesTheCommandAndItsFlags) {
  auto r = parse({"cgn-bench load", "--help"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 0);
  EXPECT_THAT(r.error().message, HasSubstr("Usage: cgn-bench load [OPTIONS]"));
  EXPECT_THAT(r.error().message, HasSubstr("--target"));
}

TEST(LoadOptions, TargetIsRequired) {
  auto r = parse({"cgn-bench load", "--rate", "1"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().code, 0);
  EXPECT_THAT(r.error().message, HasSubstr("--target"));
}

TEST(LoadOptions, UnknownFlagAndBadValueAreUsageErrors) {
  auto unknown = parse({"cgn-bench load", "--target", "http://127.0.0.1:1", "--no-such-flag"});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().code, 0);
  EXPECT_THAT(unknown.error().message, HasSubstr("--no-such-flag"));
  auto bad = parse({"cgn-bench load", "--target", "http://127.0.0.1:1", "--rate", "fast"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().code, 0);
  EXPECT_THAT(bad.error().message, HasSubstr("fast"));
}

TEST(LoadOptions, FlagsFillTheOptions) {
  auto r = parse({"cgn-bench load", "--target", "kv=http://127.0.0.1:1", "--target", "http://127.0.0.1:2",
                  "-n", "2", "--level", "0.85", "--no-session-header", "--records", "r.jsonl"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_THAT(r->targets, ElementsAre("kv=http://127.0.0.1:1", "http://127.0.0.1:2"));
  EXPECT_EQ(r->nodes, 2u);
  EXPECT_DOUBLE_EQ(r->level, 0.85);
  EXPECT_TRUE(r->no_session);
  EXPECT_EQ(r->out_records, "r.jsonl");
  EXPECT_EQ(r->workload, "small");
}

// The checks before any request is sent: status 2 and a message naming what is wrong.
TEST(LoadCommand, BadCombinationsAreStatusTwo) {
  struct Case {
    LoadCommandOptions o;
    std::string says;
  };
  LoadCommandOptions base;
  base.targets = {"http://127.0.0.1:1"};
  base.rate = 1;
  std::vector<Case> cases;
  cases.push_back({base, "bad --log-level"});
  cases.back().o.log_level = "loud";
  cases.push_back({base, "give exactly one of --level, --time-scale, --rate"});
  cases.back().o.level = 0.5;
  cases.push_back({base, "give at least one --target"});
  cases.back().o.targets.clear();
  cases.push_back({base, "--level needs -n/--nodes"});
  cases.back().o.rate = 0;
  cases.back().o.level = 0.5;
  for (const auto& c : cases) {
    testing::internal::CaptureStderr();
    EXPECT_EQ(run_load_command(c.o), 2) << c.says;
    EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("cgn-bench load: " + c.says));
  }
}

}  // namespace
}  // namespace cgn::bench
