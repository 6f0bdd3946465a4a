#include "core/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace cgn {

std::string_view to_string(RunError e) {
  switch (e) {
    case RunError::kNotFound:
      return "not_found";
    case RunError::kSpawn:
      return "spawn_failed";
    case RunError::kTimeout:
      return "timeout";
  }
  return "unknown";
}

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

int decode_status(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return -1;
}

}  // namespace

std::optional<std::string> find_on_path(std::string_view name, std::string_view path_env) {
  if (name.empty()) {
    return std::nullopt;
  }
  if (name.find('/') != std::string_view::npos) {
    std::string p(name);
    return is_executable_file(p) ? std::optional<std::string>(p) : std::nullopt;
  }
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string_view::npos) {
      end = path_env.size();
    }
    std::string_view dir = path_env.substr(start, end - start);
    // An empty PATH element means the current directory (POSIX); an agent must not run tools
    // from wherever it was started, so it is skipped.
    if (!dir.empty()) {
      std::string candidate = fmt::format("{}/{}", dir, name);
      if (is_executable_file(candidate)) {
        return candidate;
      }
    }
    start = end + 1;
  }
  return std::nullopt;
}

void close_descriptors_from(int lowest, int max_fd) noexcept {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(lowest), ~0U, 0U) == 0) {
    return;
  }
#endif
  for (int fd = lowest; fd < max_fd; ++fd) {
    ::close(fd);
  }
}

int descriptor_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 20)) {
    return 1 << 20;
  }
  return static_cast<int>(rl.rlim_cur);
}

std::string current_path_env() {
  const char* p = std::getenv("PATH");
  return p == nullptr ? std::string() : std::string(p);
}

Result<CaptureResult, RunError> run_capture(const std::vector<std::string>& argv,
                                            std::chrono::milliseconds timeout, size_t max_bytes,
                                            std::string_view path_env) {
  if (argv.empty()) {
    return make_error(RunError::kNotFound, "empty command");
  }
  auto exe = find_on_path(argv[0], path_env);
  if (!exe) {
    return make_error(RunError::kNotFound, fmt::format("{} not found on PATH", argv[0]));
  }
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) {
    cargv.push_back(const_cast<char*>(a.c_str()));
  }
  cargv.push_back(nullptr);

  const int max_fd = descriptor_limit();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return make_error(RunError::kSpawn, fmt::format("pipe: errno {}", errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return make_error(RunError::kSpawn, fmt::format("fork: errno {}", errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], STDOUT_FILENO);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDERR_FILENO);
    }
    close_descriptors_from(3, max_fd);
    ::execv(exe->c_str(), cargv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  CaptureResult out;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;  // EOF: the tool closed stdout (normally by exiting)
    }
    size_t room = max_bytes - out.output.size();
    if (static_cast<size_t>(n) > room) {
      out.output.append(buf, room);
      out.truncated = true;
    } else {
      out.output.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fds[0]);
  // Reap within the same deadline; a tool that closed stdout but lingers is killed.
  int status = 0;
  bool reaped = false;
  while (!timed_out) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      reaped = true;
      break;
    }
    if (w < 0 && errno != EINTR) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    ::poll(nullptr, 0, 5);
  }
  if (timed_out) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return make_error(RunError::kTimeout, fmt::format("{} ran past {} ms", argv[0], timeout.count()));
  }
  if (!reaped) {
    return make_error(RunError::kSpawn, fmt::format("waitpid: errno {}", errno));
  }
  out.exit_code = decode_status(status);
  return out;
}

}  // namespace cgn
