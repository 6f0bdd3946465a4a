#include "bench_harness/sim_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cgn::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CliResult<BenchCommand> parse(std::vector<std::string> args) {
  std::vector<const char*> argv;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  return parse_bench_options(static_cast<int>(argv.size()), argv.data());
}

TEST(BenchOptions, HelpListsBothSubcommands) {
  auto r = parse({"cgn-bench", "--help"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 0);
  EXPECT_THAT(r.error().message, HasSubstr("sim"));
  EXPECT_THAT(r.error().message, HasSubstr("live load generator"));
}

TEST(BenchOptions, SimHelpListsItsFlags) {
  auto r = parse({"cgn-bench", "sim", "--help"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 0);
  EXPECT_THAT(r.error().message, HasSubstr("--pd-prefill"));
}

TEST(BenchOptions, NoSubcommandUnknownFlagAndBadValueAreUsageErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"cgn-bench"}, {"cgn-bench", "sim", "--no-such-flag"}, {"cgn-bench", "sim", "--limit", "many"}}) {
    auto r = parse(args);
    ASSERT_FALSE(r) << args.back();
    EXPECT_NE(r.error().code, 0) << args.back();
    EXPECT_FALSE(r.error().message.empty());
  }
  EXPECT_THAT(parse({"cgn-bench", "sim", "--no-such-flag"}).error().message, HasSubstr("--no-such-flag"));
  EXPECT_THAT(parse({"cgn-bench", "sim", "--limit", "many"}).error().message, HasSubstr("many"));
}

TEST(BenchOptions, SimFlagsFillTheOptions) {
  auto r = parse({"cgn-bench", "sim", "-w", "llmd", "--limit", "500", "--levels", "0.5", "0.85",
                  "--pd-prefill", "2", "3", "--quick", "--md", "out.md"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->load);
  EXPECT_EQ(r->sim.workload, "llmd");
  EXPECT_EQ(r->sim.limit, 500u);
  EXPECT_THAT(r->sim.levels, ElementsAre(0.5, 0.85));
  EXPECT_THAT(r->sim.pd_prefill, ElementsAre(2u, 3u));
  EXPECT_TRUE(r->sim.quick);
  EXPECT_EQ(r->sim.out_md, "out.md");
}

// Everything after `load` is cgn-bench-load's, its --help and unknown flags included.
TEST(BenchOptions, LoadTakesTheRestAsIs) {
  auto r = parse({"cgn-bench", "load", "--target", "http://127.0.0.1:1", "--help", "--whatever"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->load);
  EXPECT_THAT(r->load_args, ElementsAre("--target", "http://127.0.0.1:1", "--help", "--whatever"));
}

TEST(BenchSim, BadPoliciesAndWorkloadAreStatusTwo) {
  SimCommandOptions o;
  o.policies = "kv,nonsense";
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_sim_command(o), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("cgn-bench: bad --policies 'kv,nonsense'"));
  EXPECT_THAT(err,
              HasSubstr("routing policy \"nonsense\" is not registered; registered: kv, round_robin, random, "
                        "least_load, session"));
  o = SimCommandOptions{};
  o.workload = "nope";
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_sim_command(o), 2);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("cgn-bench: "));
}

TEST(BenchSim, MissingTraceIsStatusOne) {
  SimCommandOptions o;
  o.trace = "/nonexistent/trace.jsonl";
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_sim_command(o), 1);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("cgn-bench: "));
}

}  // namespace
}  // namespace cgn::bench
