// Shutdown signals, handled the same way by every daemon: the main thread blocks SIGTERM and
// SIGINT (and ignores SIGPIPE) before it starts any thread, so every thread it starts inherits the
// mask and no handler runs at an arbitrary point; then it waits for one of them synchronously and
// stops the application object (docs/design/lifecycle.md).
//
//   int main(int argc, char** argv) {
//     ... parse options ...
//     cgn::ShutdownSignals signals;  // before any thread starts
//     App app(...); app.start();
//     signals.wait();
//     app.stop(deadline);
//   }
#pragma once

#include <csignal>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace cgn {

class ShutdownSignals {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread and ignores SIGPIPE (a peer closing a socket
  // is an error value, not a process exit). Call before any thread starts.
  ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Blocks until SIGTERM or SIGINT arrives; returns its number. A signal sent before the call
  // stays pending and is returned at once.
  int wait() const;
  // Whether SIGTERM or SIGINT has arrived and waits for wait(): for a long start (a large
  // allocation) that gives up when asked to stop. Leaves the signal pending.
  bool pending() const;

 private:
  sigset_t set_{};
};

// SIGHUP (reload) for a daemon. The constructor blocks SIGHUP in the calling thread: construct it
// in main before any thread starts (beside ShutdownSignals), so every thread inherits the mask and
// the signal is only ever taken here. start() starts one thread that calls `on_hangup` for each
// SIGHUP (signalfd); stop() (and the destructor) ends and joins it.
class HangupSignal {
 public:
  HangupSignal();
  ~HangupSignal();
  HangupSignal(const HangupSignal&) = delete;
  HangupSignal& operator=(const HangupSignal&) = delete;

  // Why it cannot wait for SIGHUP (the descriptors cannot be opened), or nullopt once it waits.
  std::optional<std::string> start(std::function<void()> on_hangup);
  void stop();

 private:
  sigset_t set_{};
  int signal_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: written by stop()
  std::thread thread_;
};

}  // namespace cgn
