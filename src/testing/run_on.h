// Runs one coroutine to completion on a test's private io_context and returns its value. Handlers
// run until that coroutine is done, not until the context runs out of work: an open stream keeps
// an HttpClient's deadline sweeper ticking, so the context would never stop by itself. (co_spawn's
// future needs a default-constructible value, hence the optional inside.) Header only, test code.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <utility>

namespace cgn::testing {

template <class T>
boost::asio::awaitable<std::optional<T>> wrap_optional(boost::asio::awaitable<T> aw) {
  co_return co_await std::move(aw);
}

template <class T>
T run_on(boost::asio::io_context& ctx, boost::asio::awaitable<T> aw) {
  auto fut = boost::asio::co_spawn(ctx, wrap_optional(std::move(aw)), boost::asio::use_future);
  ctx.restart();
  while (fut.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    ctx.run_one_for(std::chrono::milliseconds(50));
  }
  return *fut.get();
}

}  // namespace cgn::testing
