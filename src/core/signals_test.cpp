#include "core/signals.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <csignal>
#include <thread>

namespace cgn {
namespace {

// Each test runs in its own thread: the mask it sets and the signal it sends stay there.
template <class F>
void in_thread(F f) {
  std::thread t(f);
  t.join();
}

TEST(ShutdownSignals, ReturnsSigtermSentBeforeTheWait) {
  in_thread([] {
    ShutdownSignals signals;
    ASSERT_EQ(pthread_kill(pthread_self(), SIGTERM), 0);  // pending: blocked, not delivered
    EXPECT_EQ(signals.wait(), SIGTERM);
  });
}

TEST(ShutdownSignals, ReturnsSigint) {
  in_thread([] {
    ShutdownSignals signals;
    ASSERT_EQ(pthread_kill(pthread_self(), SIGINT), 0);
    EXPECT_EQ(signals.wait(), SIGINT);
  });
}

TEST(ShutdownSignals, ThreadsStartedAfterwardsInheritTheMask) {
  in_thread([] {
    ShutdownSignals signals;
    sigset_t child_mask;
    sigemptyset(&child_mask);
    std::thread([&] { pthread_sigmask(SIG_BLOCK, nullptr, &child_mask); }).join();
    EXPECT_EQ(sigismember(&child_mask, SIGTERM), 1);
    EXPECT_EQ(sigismember(&child_mask, SIGINT), 1);
  });
}

TEST(ShutdownSignals, IgnoresSigpipe) {
  in_thread([] {
    ShutdownSignals signals;
    struct sigaction now {};
    ASSERT_EQ(sigaction(SIGPIPE, nullptr, &now), 0);
    EXPECT_EQ(now.sa_handler, SIG_IGN);
  });
}

}  // namespace
}  // namespace cgn
