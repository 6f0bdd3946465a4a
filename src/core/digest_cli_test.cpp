#include "core/digest_cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/process.h"

namespace cgn {
namespace {

using ::testing::HasSubstr;

CliResult<DigestCliOptions> parse(std::vector<std::string> args) {
  std::vector<const char*> argv;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  return parse_digest_options(static_cast<int>(argv.size()), argv.data());
}

TEST(DigestCli, HelpIsStatusZero) {
  auto r = parse({"cgn-digest", "--help"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 0);
  EXPECT_THAT(r.error().message, HasSubstr("--block-bytes"));
}

TEST(DigestCli, UnknownFlagAndBadValueAreUsageErrors) {
  auto unknown = parse({"cgn-digest", "--no-such-flag"});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().code, 0);
  EXPECT_THAT(unknown.error().message, HasSubstr("--no-such-flag"));
  auto bad = parse({"cgn-digest", "--endpoint", "images"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().code, 0);
  EXPECT_THAT(bad.error().message, HasSubstr("images"));
  auto nan = parse({"cgn-digest", "--block-bytes", "lots"});
  ASSERT_FALSE(nan);
  EXPECT_NE(nan.error().code, 0);
}

TEST(DigestCli, FlagsFillTheOptions) {
  auto r = parse({"cgn-digest", "--raw", "--model", "m", "--block-bytes", "128", "--seed", "body.txt"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->raw);
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->block_bytes, 128u);
  EXPECT_TRUE(r->seed_only);
  EXPECT_EQ(r->input, "body.txt");
}

TEST(DigestCli, RunRejectsBadBlockBytesRawWithoutModelAndMissingInput) {
  testing::TempDir dir;
  testing::write_file(dir.file("body"), "hello");
  DigestCliOptions o;
  o.input = dir.file("body");
  o.block_bytes = 100;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_digest_command(o), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("--block-bytes must be a multiple of 64"));
  o.block_bytes = 256;
  o.raw = true;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_digest_command(o), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("--raw needs --model"));
  o.input = dir.file("missing");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_digest_command(o), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("cannot read"));
}

TEST(DigestCli, RunPrintsTheSeedOfARawPrompt) {
  testing::TempDir dir;
  testing::write_file(dir.file("body"), std::string(512, 'a'));
  auto o = parse({"cgn-digest", "--raw", "--model", "m", "--seed", dir.file("body")});
  ASSERT_TRUE(o) << o.error().message;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_digest_command(*o), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(),
            to_hex(make_digest_seed(DigestSeedFields{.model = "m", .canonical_tools = ""})) + "\n");
}

TEST(DigestCli, RunGivesTheOpenAiErrorForABadBody) {
  testing::TempDir dir;
  testing::write_file(dir.file("body"), "{not json");
  DigestCliOptions o;
  o.input = dir.file("body");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_digest_command(o), 1);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("\"error\""));
}

}  // namespace
}  // namespace cgn
