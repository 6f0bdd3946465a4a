// LocalExchange on a real io_context thread (the worker's part) with the test as the reader:
// backpressure bounds what a slow reader makes it hold, cancel() ends a handler waiting for room,
// and a handler that answers nothing gets the HTTP server's 500.
#include "router/grpc_api/local_exchange.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <string>
#include <thread>

#include "testing/process.h"

namespace cgn::router::grpc_api {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
constexpr auto kGenerous = 30s;
constexpr size_t kChunk = size_t{64} << 10;
constexpr int kWrites = 40;  // 2.5 MiB, ten times the bound

class Worker {
 public:
  Worker() : guard_(io.get_executor()), thread_([this] { io.run(); }) {}
  ~Worker() {
    guard_.reset();
    thread_.join();
  }
  asio::io_context io;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

std::shared_ptr<LocalExchange> exchange(Worker& w) {
  return std::make_shared<LocalExchange>(w.io, 0, http::Request{http::Verb::post, "/v1/completions", 11},
                                         "10.0.0.1:5");
}

// Streams kWrites chunks of kChunk bytes, counting the writes that went through.
http::Handler streamer(std::atomic<int>& writes, std::atomic<bool>& refused) {
  return [&writes, &refused](http::Exchange& ex) -> asio::awaitable<void> {
    (void)co_await ex.begin_stream(200, {});
    const std::string chunk(kChunk, 'x');
    for (int i = 0; i < kWrites; ++i) {
      auto st = co_await ex.write(chunk);
      if (!st) {
        refused = true;
        co_return;
      }
      ++writes;
    }
    (void)co_await ex.end_stream();
  };
}

Piece take(LocalExchange& ex) {
  for (auto until = std::chrono::steady_clock::now() + kGenerous; std::chrono::steady_clock::now() < until;) {
    if (auto p = ex.next(50ms)) {
      return std::move(*p);
    }
  }
  ADD_FAILURE() << "no piece came";
  return Piece{};
}

TEST(LocalExchange, ASlowReaderMakesTheHandlerWaitAtTheBound) {
  Worker w;
  std::atomic<int> writes{0};
  std::atomic<bool> refused{false};
  const http::Handler h = streamer(writes, refused);
  auto ex = exchange(w);
  ex->start(h);
  ASSERT_TRUE(cgn::testing::wait_until([&] { return ex->waiting_for_room(); }, kGenerous));
  EXPECT_LE(ex->pending_bytes(), LocalExchange::kMaxPendingBytes + kChunk);
  EXPECT_LT(writes.load(), kWrites);
  Piece head = take(*ex);
  EXPECT_EQ(head.kind, Piece::Kind::kHead);
  EXPECT_EQ(head.status, 200u);
  size_t bytes = 0;
  for (;;) {
    EXPECT_LE(ex->pending_bytes(), LocalExchange::kMaxPendingBytes + kChunk);
    Piece p = take(*ex);
    if (p.kind != Piece::Kind::kBytes) {
      EXPECT_EQ(p.kind, Piece::Kind::kEnd);
      break;
    }
    bytes += p.bytes.size();
  }
  EXPECT_EQ(bytes, kChunk * kWrites);
  EXPECT_EQ(take(*ex).kind, Piece::Kind::kDone);
  EXPECT_TRUE(ex->done());
  EXPECT_FALSE(refused.load());
}

TEST(LocalExchange, CancelEndsAHandlerThatWaitsForRoom) {
  Worker w;
  std::atomic<int> writes{0};
  std::atomic<bool> refused{false};
  const http::Handler h = streamer(writes, refused);
  auto ex = exchange(w);
  ex->start(h);
  ASSERT_TRUE(cgn::testing::wait_until([&] { return ex->waiting_for_room(); }, kGenerous));
  ex->cancel();
  EXPECT_TRUE(cgn::testing::wait_until([&] { return ex->done(); }, kGenerous));
  EXPECT_TRUE(refused.load());
  EXPECT_FALSE(ex->client_open());
}

TEST(LocalExchange, AHandlerThatAnswersNothingIsA500AndSeesTheRemoteAddress) {
  Worker w;
  std::string seen;
  const http::Handler h = [&seen](http::Exchange& ex) -> asio::awaitable<void> {
    seen = ex.remote_address();
    co_return;
  };
  auto ex = exchange(w);
  ex->start(h);
  Piece head = take(*ex);
  EXPECT_EQ(head.kind, Piece::Kind::kHead);
  EXPECT_EQ(head.status, 500u);
  EXPECT_EQ(take(*ex).kind, Piece::Kind::kBytes);
  EXPECT_EQ(take(*ex).kind, Piece::Kind::kEnd);
  EXPECT_EQ(take(*ex).kind, Piece::Kind::kDone);
  EXPECT_EQ(seen, "10.0.0.1:5");
}

}  // namespace
}  // namespace cgn::router::grpc_api
