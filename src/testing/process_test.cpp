#include "testing/process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

namespace cgn::testing {
namespace {

using namespace std::chrono_literals;

// True when `pid` is gone or a zombie waiting for its new parent to reap it.
bool dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return true;
  }
  const auto close = line.rfind(')');
  return close == std::string::npos || line.substr(close + 2, 1) == "Z";
}

TEST(Process, ACrashedTestLeavesNoChildRunning) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t test = ::fork();
  ASSERT_GE(test, 0);
  if (test == 0) {
    // Stands in for a test binary that starts a process and then crashes: no destructor runs.
    ::close(fds[0]);
    auto* p = new Process({"sleep", "1000"});
    const pid_t child = p->pid();
    (void)!::write(fds[1], &child, sizeof child);
    ::_exit(3);
  }
  ::close(fds[1]);
  pid_t child = 0;
  ASSERT_EQ(::read(fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(test, &status, 0), test);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(wait_until([&] { return dead(child); }, 10s)) << "sleep " << child << " outlived its test";
  if (!dead(child)) {
    ::kill(child, SIGKILL);
  }
}

TEST(WaitForPortFile, EndsWhenTheProcessExitsWithoutWritingIt) {
  const TempDir dir;
  Process p({"sh", "-c", "echo 'bad flag' >&2; exit 3"});
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_for_port_file(dir.file("port"), p, 60s), 0);
  // Generous against a loaded machine, far below the 60 s a wait for the file alone takes.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_EQ(p.describe(), "exited with status 3");
  EXPECT_NE(p.log().find("bad flag"), std::string::npos) << p.log();
}

TEST(WaitForPortFile, ReadsThePortOfARunningProcess) {
  const TempDir dir;
  Process p({"sh", "-c", "echo 4321 > \"$0\"; exec sleep 1000", dir.file("port")});
  EXPECT_EQ(wait_for_port_file(dir.file("port"), p, 60s), 4321);
  EXPECT_EQ(p.describe(), "running (pid " + std::to_string(p.pid()) + ")");
}

TEST(WaitForPortFile, ReadsThePortOfAProcessThatExitedAfterWritingIt) {
  const TempDir dir;
  Process p({"sh", "-c", "echo 4321 > \"$0\"", dir.file("port")});
  ASSERT_EQ(p.wait(20s), 0);
  EXPECT_EQ(wait_for_port_file(dir.file("port"), p, 60s), 4321);
}

}  // namespace
}  // namespace cgn::testing
