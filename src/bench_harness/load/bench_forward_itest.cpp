// `cgn-bench load` is cgn-bench-load: the real binaries, the subcommand forwarded with its
// arguments and its exit status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "testing/process.h"

namespace cgn::bench {
namespace {

using testing::bin_path;
using ::testing::HasSubstr;
using testing::Process;

constexpr auto kGenerous = std::chrono::seconds(60);

TEST(CgnBenchLoad, HelpComesFromCgnBenchLoadUnderTheSubcommandsName) {
  Process p({bin_path("cgn-bench"), "load", "--help"});
  EXPECT_EQ(p.wait(kGenerous), 0) << p.log();
  EXPECT_THAT(p.log(), HasSubstr("live load generator"));
  EXPECT_THAT(p.log(), HasSubstr("cgn-bench load [OPTIONS]"));
  EXPECT_THAT(p.log(), HasSubstr("--engine-time-scale"));
}

TEST(CgnBenchLoad, ArgumentsAndStatusPassThrough) {
  Process p({bin_path("cgn-bench"), "load", "--target", "http://127.0.0.1:1", "--rate", "1", "--level", "1"});
  EXPECT_EQ(p.wait(kGenerous), 2) << p.log();
  EXPECT_THAT(p.log(), HasSubstr("cgn-bench load: give exactly one of --level, --time-scale, --rate"));
}

TEST(CgnBenchLoad, UnknownFlagIsCgnBenchLoadsUsageError) {
  Process p({bin_path("cgn-bench"), "load", "--target", "http://127.0.0.1:1", "--no-such-flag"});
  const int status = p.wait(kGenerous);
  EXPECT_NE(status, 0);
  EXPECT_NE(status, 127) << p.log();  // 127: cgn-bench-load was not found
  EXPECT_THAT(p.log(), HasSubstr("--no-such-flag"));
}

}  // namespace
}  // namespace cgn::bench
