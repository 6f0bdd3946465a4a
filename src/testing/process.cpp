#include "testing/process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace cgn::testing {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    throw std::runtime_error("socket() failed");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("bind() failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return pred();
    }
    std::this_thread::sleep_for(poll);
  }
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "cgn-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed");
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::istringstream in(read_file(task.path().string() + "/children"));
    pid_t c = 0;
    while (in >> c) {
      out.push_back(c);
    }
  }
  return out;
}

namespace {
std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}
}  // namespace

std::string bin_path(const std::string& name) {
  return env_or("CGN_BIN_DIR", CGN_DEFAULT_BIN_DIR) + "/" + name;
}
std::string source_path(const std::string& rel) {
  return env_or("CGN_SOURCE_DIR", CGN_DEFAULT_SOURCE_DIR) + "/" + rel;
}
std::string sample_path(const std::string& name) {
  return source_path("testdata/samples/" + name);
}

Process::Process(std::vector<std::string> argv, std::map<std::string, std::string> env, std::string log_path)
    : log_path_(std::move(log_path)) {
  if (log_path_.empty()) {
    char tmpl[] = "/tmp/cgn-proc-XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd >= 0) {
      ::close(fd);
    }
    log_path_ = tmpl;
    own_log_ = true;
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    ::setpgid(0, 0);
    // A test that crashes (no destructor runs) must not leave its processes serving: the kernel
    // kills this child when the thread that forked it ends. If the test died before this line,
    // the child is already orphaned and gives up at once.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(127);
    }
    int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::close(devnull);
    }
    for (const auto& [k, v] : env) {
      ::setenv(k.c_str(), v.c_str(), 1);
    }
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (auto& a : argv) {
      args.push_back(a.data());
    }
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s failed: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
}

Process::~Process() {
  if (!exited_ && pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  } else if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);  // stray grandchildren
  }
  if (own_log_) {
    ::unlink(log_path_.c_str());
  }
}

bool Process::running() {
  if (exited_) {
    return false;
  }
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    status_ = st;
    return false;
  }
  return true;
}

void Process::signal(int sig) {
  if (!exited_) {
    ::kill(pid_, sig);
  }
}

int Process::wait(std::chrono::milliseconds timeout) {
  if (!wait_until([this] { return !running(); }, timeout, std::chrono::milliseconds(5))) {
    return -1;
  }
  if (WIFEXITED(status_)) {
    return WEXITSTATUS(status_);
  }
  if (WIFSIGNALED(status_)) {
    return 128 + WTERMSIG(status_);
  }
  return -1;
}

int Process::stop(std::chrono::milliseconds grace) {
  if (!running()) {
    return wait(std::chrono::milliseconds(0));
  }
  signal(SIGTERM);
  int rc = wait(grace);
  if (rc == -1) {
    ::kill(-pid_, SIGKILL);
    rc = wait(std::chrono::milliseconds(5000));
  }
  return rc;
}

std::string Process::log() const {
  return read_file(log_path_);
}

std::string Process::describe() {
  if (running()) {
    return "running (pid " + std::to_string(pid_) + ")";
  }
  return "exited with status " + std::to_string(wait(std::chrono::milliseconds(0)));
}

namespace {
// The port in a complete port file ("PORT\n"), or 0.
int read_port_file(const std::string& path) {
  const std::string s = read_file(path);
  if (s.empty() || s.back() != '\n') {
    return 0;
  }
  return std::max(0, std::atoi(s.c_str()));
}
}  // namespace

int wait_for_port_file(const std::string& path, std::chrono::milliseconds timeout) {
  int port = 0;
  wait_until([&] { return (port = read_port_file(path)) > 0; }, timeout);
  return port;
}

int wait_for_port_file(const std::string& path, Process& proc, std::chrono::milliseconds timeout) {
  int port = 0;
  wait_until([&] { return (port = read_port_file(path)) > 0 || !proc.running(); }, timeout);
  return port > 0 ? port : read_port_file(path);  // it may have written the port, then exited
}

}  // namespace cgn::testing
