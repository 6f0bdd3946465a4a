// LocalExchange: an http::Exchange for a request that did not come over a socket (a gRPC call,
// server.h). The gateway's route handler runs it on one of the HTTP server's worker threads
// exactly as it runs a ServerConnection; what the handler answers (respond(), begin_stream(),
// write(), end_stream(), abort()) becomes Pieces in a bounded queue that the caller's thread
// takes with next().
//
// Threads: the handler side (every Exchange method, run()) belongs to the worker whose
// io_context the exchange was made with. next(), cancel(), drain() and done() are for any other
// thread (the gRPC call's). Shared ownership: the handler's coroutine and the caller each hold
// the exchange, so either may go first.
//
// Backpressure: write() waits (without blocking the worker) while kMaxPendingBytes or more are
// queued and not yet taken, so a slow reader holds at most kMaxPendingBytes plus one write.
//
// Cancellation: cancel() turns client_open() false and cancels what the handler awaits, through
// the coroutine's cancellation slot, on the worker (as a departed HTTP client does); drain()
// makes draining() true (the server is stopping).
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/http/server.h"

namespace cgn::router::grpc_api {

// What the handler answered, in order: one kHead, then kBytes, then kEnd (complete) or kAbort
// (cut off); kDone once the handler has returned (always last).
struct Piece {
  enum class Kind : uint8_t { kHead, kBytes, kEnd, kAbort, kDone };
  Kind kind = Kind::kDone;
  unsigned status = 0;   // kHead
  http::Fields headers;  // kHead
  std::string bytes;     // kBytes
};

class LocalExchange final : public http::Exchange, public std::enable_shared_from_this<LocalExchange> {
 public:
  static constexpr size_t kMaxPendingBytes = size_t{256} << 10;

  LocalExchange(boost::asio::io_context& worker, size_t worker_index, http::Request request,
                std::string remote_address);

  // Runs `handler` on the worker (posted there), then ends the answer as the HTTP server does: a
  // 500 when the handler gave none, the end of an unfinished stream; then kDone.
  void start(const http::Handler& handler);

  // The next piece, waiting up to `wait`; nullopt when none came in that time.
  std::optional<Piece> next(std::chrono::milliseconds wait);
  // The caller is gone (the gRPC call was cancelled, or the API is stopping). Idempotent.
  void cancel();
  void drain() { draining_ = true; }
  // The handler has returned.
  bool done() const;
  // Bytes queued and not yet taken; whether a write() waits for room (tests).
  size_t pending_bytes() const;
  bool waiting_for_room() const;

  // http::Exchange (the worker's thread)
  http::Request& request() override { return req_; }
  size_t worker_index() const override { return worker_index_; }
  std::string remote_address() const override { return remote_; }
  bool client_open() const override { return open_; }
  bool draining() const override { return draining_; }
  bool response_started() const override { return started_; }
  boost::asio::awaitable<http::HttpStatus> respond(http::Response res) override;
  boost::asio::awaitable<http::HttpStatus> begin_stream(unsigned status, http::Fields headers) override;
  http::HttpStatus begin_stream_deferred(unsigned status, http::Fields headers) override;
  boost::asio::awaitable<http::HttpStatus> write(std::string_view bytes) override;
  boost::asio::awaitable<http::HttpStatus> end_stream() override;
  boost::asio::awaitable<http::HttpStatus> end_stream(std::string_view last_bytes) override;
  void abort() override;

 private:
  static boost::asio::awaitable<void> run(std::shared_ptr<LocalExchange> self, const http::Handler& handler);
  http::HttpStatus open_stream(unsigned status, http::Fields headers);
  void push(Piece p);
  // Waits while the queue is full; false when the caller went away meanwhile.
  boost::asio::awaitable<bool> room();

  boost::asio::io_context& worker_;
  const size_t worker_index_;
  http::Request req_;
  const std::string remote_;
  boost::asio::cancellation_signal cancel_;  // the worker's
  boost::asio::steady_timer room_timer_;     // write() waits on it for room in the queue
  bool started_ = false;
  bool stream_open_ = false;
  std::atomic<bool> open_{true};
  std::atomic<bool> draining_{false};
  std::atomic<bool> cancel_sent_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> queue_;
  size_t pending_bytes_ = 0;
  bool waiting_for_room_ = false;
  bool done_ = false;
};

}  // namespace cgn::router::grpc_api
