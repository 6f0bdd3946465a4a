// Test helpers for hermetic integration and e2e tests: free loopback ports,
// temporary directories, child processes, and waiting on a condition with a
// deadline (never a fixed sleep as synchronisation).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cgn::testing {

// A TCP port on 127.0.0.1 that was free when asked (bind to port 0, read it back).
// Prefer letting the program under test bind port 0 and report it (--port-file).
int free_port();

// Polls pred every `poll` until it returns true or `timeout` passes. Returns pred's last value.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds(10));

// A directory removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);

// Direct children of `pid` (every thread's /proc/<pid>/task/<tid>/children): the engine an agent
// spawned, for tests that kill it.
std::vector<pid_t> children_of(pid_t pid);

// Path of a built binary: $CGN_BIN_DIR, else the bin folder of the build this library is part of.
std::string bin_path(const std::string& name);
// Path inside the source tree: $CGN_SOURCE_DIR, else the tree this library was built from.
std::string source_path(const std::string& rel);
// A captured engine or GPU-tool output in testdata/samples/ (see the README there).
std::string sample_path(const std::string& name);

// A child process in its own process group; killed (SIGKILL to the group) on destruction
// unless it already exited, and killed by the kernel (PR_SET_PDEATHSIG) when the test process
// dies without destroying it, e.g. on a crash. The latter follows the thread that constructed the
// Process: construct it on a thread that outlives it (the test's own). stdout and stderr go to a
// log file readable by the test.
class Process {
 public:
  Process(std::vector<std::string> argv, std::map<std::string, std::string> env = {},
          std::string log_path = "");
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // Sends sig to the process (not the group).
  void signal(int sig);
  // Waits for exit up to timeout; returns the exit status (WEXITSTATUS, or 128+signal), or -1 on timeout.
  int wait(std::chrono::milliseconds timeout);
  // SIGTERM then SIGKILL after grace.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  std::string log() const;
  const std::string& log_path() const { return log_path_; }
  // "running (pid N)", or "exited with status S" (S as wait() returns it): for failure messages.
  std::string describe();

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string log_path_;
  bool own_log_ = false;
};

// Reads an integer port written by a program's --port-file, waiting until it appears.
int wait_for_port_file(const std::string& path, std::chrono::milliseconds timeout);
// Likewise for the port `proc` writes, but the wait ends as soon as `proc` exits (a failed start)
// rather than at the timeout: 0 then, unless it wrote the port first. On 0, proc.describe() and
// proc.log() say why.
int wait_for_port_file(const std::string& path, Process& proc, std::chrono::milliseconds timeout);

}  // namespace cgn::testing
