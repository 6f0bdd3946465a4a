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

 private:
  sigset_t set_{};
};

}  // namespace cgn
