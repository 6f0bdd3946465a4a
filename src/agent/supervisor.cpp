#include "agent/supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <vector>

#include "agent/loopback_get.h"
#include "core/log.h"
#include "core/subprocess.h"

extern char** environ;

namespace cgn::agent {

namespace {

const log::Logger& logger() {
  static const log::Logger l = log::get("agent");
  return l;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) {
    return fmt::format("exit status {}", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return fmt::format("killed by signal {}", WTERMSIG(status));
  }
  return "ended";
}

// Reads the engine's merged stdout/stderr until EOF, one log line per output line. Lines longer
// than kMaxLine are cut into pieces so one runaway line cannot grow memory without bound.
void pump_lines(int fd, const LineSink& sink) {
  constexpr size_t kMaxLine = 16 * 1024;
  std::string pending;
  char buf[8192];
  auto emit = [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    CGN_LOG_INFO(logger(), fmt::format("[engine] {}", line));
    if (sink) {
      sink(line);
    }
  };
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(std::string_view(pending).substr(start, nl - start));
    }
    pending.erase(0, start);
    while (pending.size() >= kMaxLine) {
      emit(std::string_view(pending).substr(0, kMaxLine));
      pending.erase(0, kMaxLine);
    }
  }
  if (!pending.empty()) {
    emit(pending);
  }
  ::close(fd);
}

}  // namespace

Supervisor::Supervisor(LaunchCommand command, HealthSpec health, SupervisorOptions options,
                       StateListener listener, LineSink sink)
    : command_(std::move(command)),
      health_(std::move(health)),
      options_(std::move(options)),
      listener_(std::move(listener)),
      sink_(std::move(sink)) {}

Supervisor::~Supervisor() {
  stop();
}

void Supervisor::start() {
  if (thread_.joinable()) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { command_.argv.empty() ? run_attached() : run(); });
}

void Supervisor::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

std::optional<pid_t> Supervisor::pid() const {
  std::lock_guard lock(mu_);
  return pid_ > 0 ? std::optional<pid_t>(pid_) : std::nullopt;
}

bool Supervisor::wait_or_stop(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, d, [this] { return stopping_; });
}

void Supervisor::set_state(cluster::EngineState s, std::string detail) {
  if (reported_once_ && state_.load() == s) {
    return;
  }
  reported_once_ = true;
  state_.store(s);
  CGN_LOG_INFO(logger(), "engine state", log::kv("state", to_string(s)), log::kv("starts", starts_.load()),
               log::kv("detail", detail));
  if (listener_) {
    listener_(StateChange{s, starts_.load(), std::move(detail)});
  }
}

pid_t Supervisor::spawn(std::string* why) {
  // Everything the child needs is built before fork: only async-signal-safe calls run after it.
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string_view::npos) {
      env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
  }
  for (const auto& [k, v] : command_.env) {
    env[k] = v;
  }
  std::string path = options_.path_env;
  if (path.empty()) {
    auto it = env.find("PATH");
    path = it == env.end() ? std::string() : it->second;
  }
  auto exe = find_on_path(command_.argv[0], path);
  if (!exe) {
    *why = fmt::format("{} not found on PATH", command_.argv[0]);
    return -1;
  }
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) {
    env_strings.push_back(k + "=" + v);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) {
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : command_.argv) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);

  const int max_fd = descriptor_limit();
  const pid_t agent_pid = ::getpid();
  const bool die_with_agent = !options_.outlive_agent;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *why = fmt::format("pipe: errno {}", errno);
    return -1;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    *why = fmt::format("fork: errno {}", errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    if (die_with_agent) {
      // Fired when the forking thread ends: this supervisor thread, which stops the engine
      // before it returns. An agent killed before this line is caught by the getppid check.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != agent_pid) {
        ::_exit(127);
      }
    }
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
    }
    close_descriptors_from(3, max_fd);
    // Default signal dispositions and mask for the engine, whatever the agent uses.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(exe->c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  // Also from the parent, so the group exists before anyone signals it.
  ::setpgid(pid, pid);
  ::close(fds[1]);
  const int read_fd = fds[0];
  reader_ = std::thread([read_fd, this] { pump_lines(read_fd, sink_); });
  return pid;
}

void Supervisor::probe_once(bool* was_ready, uint32_t* failures,
                            std::chrono::steady_clock::time_point* ready_since) {
  auto reply = loopback_get(options_.host, options_.port, health_.path, options_.probe_timeout, 64 * 1024);
  HealthAnswer answer;
  std::string detail;
  if (reply.ok()) {
    answer.status = reply->status;
    answer.body = reply->body.substr(0, 4096);
    detail = fmt::format("GET {} -> {}", health_.path, reply->status);
  } else {
    detail = fmt::format("GET {}: {}", health_.path, reply.error().message);
  }
  switch (classify_health(health_, answer, *was_ready)) {
    case HealthVerdict::kReady:
      if (!*was_ready) {
        *ready_since = std::chrono::steady_clock::now();
      }
      *was_ready = true;
      *failures = 0;
      set_state(cluster::EngineState::kReady, detail);
      break;
    case HealthVerdict::kLoading:
      *failures = 0;
      break;
    case HealthVerdict::kUnhealthy:
      if (++*failures >= options_.unhealthy_after) {
        set_state(cluster::EngineState::kUnhealthy, detail);
      }
      break;
  }
}

std::optional<int> Supervisor::watch(pid_t pid, bool* was_ready,
                                     std::chrono::steady_clock::time_point* ready_since) {
  uint32_t failures = 0;
  for (;;) {
    int status = 0;
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      return status;
    }
    probe_once(was_ready, &failures, ready_since);
    // The probe may have taken a while: look at the process again before sleeping.
    w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      return status;
    }
    auto interval = state_.load() == cluster::EngineState::kReady ? options_.ready_probe_interval
                                                                  : options_.probe_interval;
    if (wait_or_stop(interval)) {
      return std::nullopt;
    }
  }
}

void Supervisor::terminate(pid_t pid) {
  ::kill(-pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + options_.stop_grace;
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno == ECHILD)) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      CGN_LOG_WARN(logger(), "engine ignored SIGTERM; killing", log::kv("pid", pid));
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    ::poll(nullptr, 0, 10);
  }
  // Workers the engine left in its group (they would hold GPU memory and the output pipe).
  ::kill(-pid, SIGKILL);
}

void Supervisor::reap_output() {
  if (reader_.joinable()) {
    reader_.join();
  }
}

void Supervisor::run() {
  auto backoff = options_.backoff_initial;
  for (;;) {
    std::string why;
    starts_.fetch_add(1);
    pid_t pid = spawn(&why);
    if (pid > 0) {
      {
        std::lock_guard lock(mu_);
        pid_ = pid;
      }
      set_state(cluster::EngineState::kStarting, fmt::format("pid {}", pid));
      bool was_ready = false;
      auto ready_since = std::chrono::steady_clock::now();
      auto status = watch(pid, &was_ready, &ready_since);
      if (!status) {  // stop asked
        terminate(pid);
        reap_output();
        {
          std::lock_guard lock(mu_);
          pid_ = -1;
        }
        set_state(cluster::EngineState::kStopped, "stopped by the agent");
        return;
      }
      ::kill(-pid, SIGKILL);  // leftovers of the group
      reap_output();
      {
        std::lock_guard lock(mu_);
        pid_ = -1;
      }
      if (was_ready && std::chrono::steady_clock::now() - ready_since >= options_.healthy_reset) {
        backoff = options_.backoff_initial;
      }
      set_state(cluster::EngineState::kExited, describe_status(*status));
    } else {
      set_state(cluster::EngineState::kExited, why);
    }
    set_state(cluster::EngineState::kRestarting, fmt::format("in {} ms", backoff.count()));
    if (wait_or_stop(backoff)) {
      set_state(cluster::EngineState::kStopped, "stopped by the agent");
      return;
    }
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

void Supervisor::run_attached() {
  set_state(cluster::EngineState::kStarting, fmt::format("attaching to {}:{}", options_.host, options_.port));
  bool was_ready = false;
  uint32_t failures = 0;
  auto ready_since = std::chrono::steady_clock::now();
  for (;;) {
    probe_once(&was_ready, &failures, &ready_since);
    auto interval = state_.load() == cluster::EngineState::kReady ? options_.ready_probe_interval
                                                                  : options_.probe_interval;
    if (wait_or_stop(interval)) {
      set_state(cluster::EngineState::kStopped, "detached");
      return;
    }
  }
}

}  // namespace cgn::agent
