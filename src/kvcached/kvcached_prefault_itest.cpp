// cgn-kvcached asked to stop while it allocates a large RAM arena (tens of seconds for tens of
// GiB): it stops there, promptly and cleanly, with status 0 and nothing written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "testing/process.h"

namespace cgn::kvcached {
namespace {

using namespace std::chrono_literals;

TEST(KvcachedProcess, SigtermWhileTheRamArenaIsAllocatedEndsTheStartPromptly) {
  testing::TempDir dir;
  const std::string config = dir.file("kv.toml");
  const std::string socket = dir.file("kv.sock");
  const std::string port_file = dir.file("kv.port");
  // 2 GiB: allocated 64 MiB at a time, long enough to be signalled in the middle, small enough
  // for a shared test machine.
  testing::write_file(
      config, "[kvcached]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\nsocket = \"" + socket +
                  "\"\nram_bytes = 2147483648\n");
  testing::Process p({testing::bin_path("cgn-kvcached"), "--config", config, "--port-file", port_file}, {},
                     dir.file("kv.log"));
  ASSERT_TRUE(testing::wait_until(
      [&] { return p.log().find("allocating the RAM arena") != std::string::npos; }, 60s, 1ms))
      << p.log();
  const auto asked = std::chrono::steady_clock::now();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0) << p.log();
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - asked);
  std::cout << "cgn-kvcached stopped " << took.count() << " ms after SIGTERM while allocating 2 GiB\n";
  EXPECT_LT(took, 15s);
  const std::string log = p.log();
  EXPECT_NE(log.find("stopped before serving"), std::string::npos) << log;
  EXPECT_EQ(log.find("kvcached: serving"), std::string::npos) << "it never served:\n" << log;
  // Nothing written: only the test's own config and log are in the folder.
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    left.push_back(e.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"kv.log", "kv.toml"}));
}

}  // namespace
}  // namespace cgn::kvcached
