#include "core/signals.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cgn {

ShutdownSignals::ShutdownSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

bool ShutdownSignals::pending() const {
  sigset_t p;
  sigemptyset(&p);
  sigpending(&p);
  return sigismember(&p, SIGTERM) == 1 || sigismember(&p, SIGINT) == 1;
}

int ShutdownSignals::wait() const {
  int sig = 0;
  while (sigwait(&set_, &sig) != 0) {
  }
  return sig;
}

HangupSignal::HangupSignal() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

HangupSignal::~HangupSignal() {
  stop();
}

std::optional<std::string> HangupSignal::start(std::function<void()> on_hangup) {
  if (thread_.joinable()) {
    return std::nullopt;
  }
  signal_fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC);
  wake_fd_ = signal_fd_ < 0 ? -1 : ::eventfd(0, EFD_CLOEXEC);
  if (signal_fd_ < 0 || wake_fd_ < 0) {
    const int err = errno;
    stop();  // closes what was opened
    return std::string("cannot wait for SIGHUP: ") + std::strerror(err);
  }
  thread_ = std::thread([this, on_hangup = std::move(on_hangup)] {
    for (;;) {
      pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) {
          continue;
        }
        return;
      }
      if (fds[1].revents != 0) {
        return;
      }
      signalfd_siginfo info{};
      if (fds[0].revents != 0 && ::read(signal_fd_, &info, sizeof info) == sizeof info) {
        on_hangup();
      }
    }
  });
  return std::nullopt;
}

void HangupSignal::stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  for (int* fd : {&signal_fd_, &wake_fd_}) {
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
  }
}

}  // namespace cgn
