// The deadline sweeper keeps every registered deadline enforced, whatever order entries come and
// go in: in particular an entry added while the cancelled tick of the last removal is still
// queued (a connection that closes and another that opens on the same turn of the loop) must
// still time out.
#include "core/http/deadline.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace cgn::http::detail {
namespace {

using namespace std::chrono_literals;

struct Entry : DeadlineEntry {
  int fired = 0;
  void on_deadline() override { ++fired; }
};

// Runs `ctx` until `done` or `limit` passes (a guard timer keeps the loop alive meanwhile).
template <typename Done>
void run_until(boost::asio::io_context& ctx, Done done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < end) {
    ctx.restart();
    ctx.run_for(10ms);
  }
}

TEST(DeadlineSweeper, AnEntryPastItsDeadlineFiresOnce) {
  boost::asio::io_context ctx;
  auto& sweeper = DeadlineSweeper::of(ctx);
  sweeper.set_interval(5ms);
  Entry e;
  sweeper.add(&e);
  e.set_deadline_after(20ms);
  run_until(
      ctx, [&] { return e.fired > 0; }, 5s);
  EXPECT_EQ(e.fired, 1);
  ctx.restart();
  ctx.run_for(60ms);  // a dozen more ticks: a fired deadline does not fire again
  EXPECT_EQ(e.fired, 1);
  sweeper.remove(&e);
}

TEST(DeadlineSweeper, AnEntryAddedWhileTheLastRemovalsCancelledTickIsQueuedStillTimesOut) {
  boost::asio::io_context ctx;
  auto& sweeper = DeadlineSweeper::of(ctx);
  sweeper.set_interval(5ms);
  Entry first;
  sweeper.add(&first);  // arms the tick
  Entry second;
  // On one turn of the loop: the last entry leaves (the pending tick is cancelled, but its
  // handler has not run yet) and a new one arrives with a deadline.
  boost::asio::post(ctx, [&] {
    sweeper.remove(&first);
    sweeper.add(&second);
    second.set_deadline_after(20ms);
  });
  run_until(
      ctx, [&] { return second.fired > 0; }, 5s);
  EXPECT_EQ(second.fired, 1) << "the new entry's deadline was never enforced";
  sweeper.remove(&second);
}

TEST(DeadlineSweeper, WithNoEntriesLeftTheLoopRunsOutOfWork) {
  boost::asio::io_context ctx;
  auto& sweeper = DeadlineSweeper::of(ctx);
  sweeper.set_interval(1000ms);
  Entry e;
  sweeper.add(&e);
  sweeper.remove(&e);
  const auto t0 = std::chrono::steady_clock::now();
  ctx.run();  // returns once the cancelled tick is handled, not a whole interval later
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms);
}

}  // namespace
}  // namespace cgn::http::detail
