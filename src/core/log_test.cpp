#include "core/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <latch>
#include <sstream>
#include <thread>
#include <vector>

#include "core/config_reader.h"
#include "testing/process.h"

namespace cgn::log {
namespace {

using ::testing::HasSubstr;

// A logger writing bare messages into a string stream.
struct Captured {
  std::ostringstream out;
  Logger logger;
  explicit Captured(spdlog::level::level_enum level = spdlog::level::info) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    logger = std::make_shared<spdlog::logger>("captured", sink);
    logger->set_pattern("%l %v");
    logger->set_level(level);
  }
  std::string text() {
    logger->flush();
    return out.str();
  }
};

TEST(Log, KvQuotesOnlyWhenNeeded) {
  EXPECT_EQ(line("node joined", kv("node", "abc"), kv("port", 8080), kv("ok", true)),
            "node joined node=abc port=8080 ok=true");
  EXPECT_EQ(line("x", kv("reason", "health check failed")), "x reason=\"health check failed\"");
  EXPECT_EQ(line("x", kv("v", "")), "x v=\"\"");
  EXPECT_EQ(line("x", kv("v", "a=b")), "x v=\"a=b\"");
  EXPECT_EQ(line("x", kv("v", "say \"hi\"\\")), "x v=\"say \\\"hi\\\"\\\\\"");
  EXPECT_EQ(line("x", kv("v", "l1\nl2\t\r\x01")), "x v=\"l1\\nl2\\t\\r\\x01\"");
  EXPECT_EQ(line("x", kv("ratio", 0.25)), "x ratio=0.25");
  EXPECT_EQ(line("only message"), "only message");
  std::string owned = "owned value";
  EXPECT_EQ(line("x", kv("s", owned)), "x s=\"owned value\"");
}

TEST(Log, SecretsFormatRedacted) {
  config::Secret s("sk-live-123", "CGN_KEYS");
  EXPECT_EQ(line("loaded", kv("key", s)), "loaded key=<redacted>");
  EXPECT_EQ(redact("sk-live-123"), "<redacted>");
  EXPECT_EQ(redact(""), "<empty>");
}

TEST(Log, RedactUrlHidesCredentialsOnly) {
  EXPECT_EQ(redact_url("http://user:pa55@etcd:2379/v3"), "http://user:<redacted>@etcd:2379/v3");
  EXPECT_EQ(redact_url("https://token@host/x"), "https://<redacted>@host/x");
  EXPECT_EQ(redact_url("http://host:1/path?q=a@b"), "http://host:1/path?q=a@b");
  EXPECT_EQ(redact_url("host:1"), "host:1");
  EXPECT_EQ(redact_url("u:p@host"), "u:<redacted>@host");
}

TEST(Log, MacrosSkipFormattingWhenTheLevelIsOff) {
  Captured c(spdlog::level::warn);
  int evaluated = 0;
  auto expensive = [&] {
    ++evaluated;
    return std::string("v");
  };
  CGN_LOG_INFO(c.logger, "not shown", kv("k", expensive()));
  CGN_LOG_DEBUG(c.logger, "not shown", kv("k", expensive()));
  EXPECT_EQ(evaluated, 0);
  CGN_LOG_WARN(c.logger, "node left routing", kv("node", "gpu-3"), kv("reason", expensive()));
  CGN_LOG_ERROR(c.logger, "boom");
  EXPECT_EQ(evaluated, 1);
  EXPECT_EQ(c.text(), "warning node left routing node=gpu-3 reason=v\nerror boom\n");
  Logger none;
  CGN_LOG_ERROR(none, "a null logger is ignored");
}

TEST(Log, StateChangeLoggerLogsOncePerChange) {
  Captured c;
  StateChangeLogger changes(c.logger);
  for (int poll = 0; poll < 5; ++poll) {
    changes.update("gpu-3", "down", spdlog::level::warn, "node unreachable", kv("node", "gpu-3"));
  }
  EXPECT_TRUE(changes.update("gpu-3", "up", spdlog::level::info, "node back", kv("node", "gpu-3")));
  EXPECT_FALSE(changes.update("gpu-3", "up", spdlog::level::info, "node back", kv("node", "gpu-3")));
  EXPECT_TRUE(changes.update("gpu-4", "up", spdlog::level::info, "node back", kv("node", "gpu-4")));
  EXPECT_EQ(c.text(),
            "warning node unreachable node=gpu-3 state=down\n"
            "info node back node=gpu-3 state=up\n"
            "info node back node=gpu-4 state=up\n");
  EXPECT_EQ(changes.size(), 2u);
  changes.forget("gpu-3");
  EXPECT_EQ(changes.size(), 1u);
  EXPECT_TRUE(changes.changed("gpu-3", "up"));  // a returning key logs its first state again
}

TEST(Log, StateChangeLoggerReportsEachChangeOnceAcrossThreads) {
  StateChangeLogger changes(nullptr);
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::atomic<int> reported{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < 1000; ++i) {
        if (changes.changed("k", "same")) {
          reported.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(reported.load(), 1);
}

TEST(Log, IsLevelKnowsTheLevelsAndChangesNothing) {
  const std::string before = current_level();
  for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
    EXPECT_TRUE(is_level(level)) << level;
  }
  EXPECT_FALSE(is_level("loud"));
  EXPECT_FALSE(is_level(""));
  EXPECT_EQ(current_level(), before);
}

TEST(Log, ConfigurePrefersTheFlagAndRejectsUnknownLevels) {
  ASSERT_TRUE(configure("warn", "", "").ok());
  EXPECT_EQ(current_level(), "warning");
  ASSERT_TRUE(configure("warn", "debug", "").ok());  // --log-level wins over the file
  EXPECT_EQ(current_level(), "debug");
  EXPECT_EQ(get("test.log.module")->level(), spdlog::level::debug);

  auto bad = configure("info", "verbose", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, LogError::bad_level);
  EXPECT_EQ(bad.error().message,
            "unknown log level 'verbose' (expected trace, debug, info, warn, error or off)");
  EXPECT_EQ(current_level(), "debug");  // unchanged on error
  ASSERT_TRUE(configure("", "", "").ok());
  EXPECT_EQ(current_level(), "info");
}

TEST(Log, ConfigureSendsLinesToTheFile) {
  testing::TempDir dir;
  testing::write_file(dir.file("plain"), "a file, not a directory");
  auto bad = configure("info", "", dir.file("plain/x.log"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, LogError::bad_file);
  EXPECT_THAT(bad.error().message, HasSubstr("cannot open log file '" + dir.file("plain/x.log") + "'"));

  ASSERT_TRUE(configure("info", "", dir.file("cgn.log")).ok());
  Logger l = get("test.file");
  CGN_LOG_INFO(l, "written to file", kv("n", 1));
  l->flush();
  set_stderr_sink();
  EXPECT_THAT(testing::read_file(dir.file("cgn.log")), HasSubstr("info test.file: written to file n=1"));
}

}  // namespace
}  // namespace cgn::log
