#include "router/grpc_api/local_exchange.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/log.h"
#include "core/openai_error.h"
#include "router/coro_warnings.h"

namespace cgn::router::grpc_api {

namespace asio = boost::asio;
using http::HttpError;
using http::HttpStatus;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}

LocalExchange::LocalExchange(asio::io_context& worker, size_t worker_index, http::Request request,
                             std::string remote_address)
    : worker_(worker),
      worker_index_(worker_index),
      req_(std::move(request)),
      remote_(std::move(remote_address)),
      room_timer_(worker) {}

void LocalExchange::start(const http::Handler& handler) {
  asio::post(worker_, [self = shared_from_this(), &handler] {
    asio::co_spawn(self->worker_, run(self, handler),
                   asio::bind_cancellation_slot(self->cancel_.slot(), [self](const std::exception_ptr& e) {
                     if (e) {
                       log::get("router")->error("in-process request ended with an exception");
                     }
                     self->push(Piece{Piece::Kind::kDone});
                   }));
  });
}

asio::awaitable<void> LocalExchange::run(std::shared_ptr<LocalExchange> self, const http::Handler& handler) {
  co_await asio::this_coro::throw_if_cancelled(false);
  try {
    co_await handler(*self);
  } catch (const std::exception& ex) {
    log::get("router")->error("handler threw: {} path={}", ex.what(), http::path_of(self->req_.target()));
  }
  if (!self->started_) {
    (void)co_await self->respond(http::make_error_response(internal_error("handler produced no response")));
  } else if (self->stream_open_) {
    (void)co_await self->end_stream();
  }
}

std::optional<Piece> LocalExchange::next(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, wait, [this] { return !queue_.empty(); })) {
    return std::nullopt;
  }
  Piece p = std::move(queue_.front());
  queue_.pop_front();
  pending_bytes_ -= p.bytes.size();
  if (waiting_for_room_ && pending_bytes_ < kMaxPendingBytes) {
    waiting_for_room_ = false;
    asio::post(worker_, [self = shared_from_this()] { self->room_timer_.cancel(); });
  }
  return p;
}

void LocalExchange::cancel() {
  if (cancel_sent_.exchange(true)) {
    return;
  }
  asio::post(worker_, [self = shared_from_this()] {
    self->open_ = false;
    std::unique_lock lock(self->mu_);
    if (!self->done_) {
      lock.unlock();
      self->cancel_.emit(asio::cancellation_type::terminal);
    }
  });
}

bool LocalExchange::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

size_t LocalExchange::pending_bytes() const {
  std::lock_guard lock(mu_);
  return pending_bytes_;
}

bool LocalExchange::waiting_for_room() const {
  std::lock_guard lock(mu_);
  return waiting_for_room_;
}

void LocalExchange::push(Piece p) {
  {
    std::lock_guard lock(mu_);
    if (p.kind == Piece::Kind::kDone) {
      done_ = true;
    }
    pending_bytes_ += p.bytes.size();
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
}

asio::awaitable<bool> LocalExchange::room() {
  for (;;) {
    if (!open_) {
      co_return false;
    }
    {
      std::lock_guard lock(mu_);
      if (pending_bytes_ < kMaxPendingBytes) {
        co_return true;
      }
      waiting_for_room_ = true;
    }
    // next() cancels the timer (posted here, so after this wait began) once there is room; a
    // cancel() cancels the wait through the coroutine's slot.
    room_timer_.expires_at(asio::steady_timer::time_point::max());
    (void)co_await room_timer_.async_wait(use_tuple);
  }
}

asio::awaitable<HttpStatus> LocalExchange::respond(http::Response res) {
  if (started_) {
    co_return http_error(HttpError::invalid_state, "response already started");
  }
  if (!open_) {
    co_return http_error(HttpError::closed, "client connection closed");
  }
  started_ = true;
  Piece head{Piece::Kind::kHead, res.result_int()};
  head.headers = std::move(res.base());
  push(std::move(head));
  push(Piece{Piece::Kind::kBytes, 0, {}, std::move(res.body())});
  push(Piece{Piece::Kind::kEnd});
  co_return Ok{};
}

HttpStatus LocalExchange::open_stream(unsigned status, http::Fields headers) {
  if (started_) {
    return http_error(HttpError::invalid_state, "response already started");
  }
  if (!open_) {
    return http_error(HttpError::closed, "client connection closed");
  }
  started_ = true;
  stream_open_ = true;
  push(Piece{Piece::Kind::kHead, status, std::move(headers)});
  return Ok{};
}

asio::awaitable<HttpStatus> LocalExchange::begin_stream(unsigned status, http::Fields headers) {
  co_return open_stream(status, std::move(headers));
}

HttpStatus LocalExchange::begin_stream_deferred(unsigned status, http::Fields headers) {
  return open_stream(status, std::move(headers));
}

asio::awaitable<HttpStatus> LocalExchange::write(std::string_view bytes) {
  if (!stream_open_) {
    co_return http_error(HttpError::invalid_state, "write() before begin_stream() or after end_stream()");
  }
  const bool room_left = co_await room();
  if (!room_left) {
    co_return http_error(HttpError::closed, "client connection closed");
  }
  if (!bytes.empty()) {
    push(Piece{Piece::Kind::kBytes, 0, {}, std::string(bytes)});
  }
  co_return Ok{};
}

asio::awaitable<HttpStatus> LocalExchange::end_stream() {
  HttpStatus st = co_await end_stream(std::string_view());
  co_return st;
}

asio::awaitable<HttpStatus> LocalExchange::end_stream(std::string_view last_bytes) {
  if (!stream_open_) {
    co_return http_error(HttpError::invalid_state, "no stream open");
  }
  stream_open_ = false;
  if (!open_) {
    co_return http_error(HttpError::closed, "client connection closed");
  }
  if (!last_bytes.empty()) {
    push(Piece{Piece::Kind::kBytes, 0, {}, std::string(last_bytes)});
  }
  push(Piece{Piece::Kind::kEnd});
  co_return Ok{};
}

void LocalExchange::abort() {
  stream_open_ = false;
  if (open_) {
    open_ = false;
    push(Piece{Piece::Kind::kAbort});
  }
}

}  // namespace cgn::router::grpc_api
