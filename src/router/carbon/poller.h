// Poller: keeps the Gate's reading fresh. One thread of its own runs one io_context with one
// HttpClient and one poll loop: fetch, record (or count the failure), sleep, again. The reading is
// cached for one poll interval; after a failure the next poll waits
// interval x 2^(failures-1), at most max_backoff and at least a 429's Retry-After, so a rate-limited
// or failing provider is not hammered. Each change between "polling" and a failure reason is
// logged once (never a token or key: they live in the provider and never reach a message).
//
// Threads: start()/stop() are for the owner (the Gateway); the provider and the client are used
// only on the poller's thread; on_failure is called there. polls() is safe from any thread.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <thread>

#include "core/clock.h"
#include "core/http/client.h"
#include "core/log.h"
#include "router/carbon/gate.h"
#include "router/carbon/provider.h"

namespace cgn::router::carbon {

struct PollerOptions {
  Nanos interval = 900 * kNanosPerSecond;
  Nanos timeout = 10 * kNanosPerSecond;  // connect + answer, per provider request
  Nanos max_backoff = 3600 * kNanosPerSecond;
  std::function<void(FetchReason)> on_failure;  // counts failures (metrics); optional
};

// The wait before the next poll after `failures` consecutive failures (0: one interval).
Nanos next_delay(const PollerOptions& o, uint32_t failures, uint32_t retry_after_s);

class Poller {
 public:
  Poller(std::unique_ptr<Provider> provider, Gate& gate, PollerOptions options,
         const Clock& clock = SteadyClock::instance());
  ~Poller();  // stop()
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Starts the thread; the first poll goes out at once.
  void start();
  // Cancels the loop (an in-flight request too) and joins the thread. Idempotent.
  void stop();
  // Polls completed, successful or not (tests wait on it).
  uint64_t polls() const { return polls_.load(std::memory_order_acquire); }

 private:
  boost::asio::awaitable<void> loop();
  // One poll: records the reading or counts the failure; returns the wait before the next.
  boost::asio::awaitable<Nanos> poll_once();

  std::unique_ptr<Provider> provider_;
  Gate& gate_;
  PollerOptions options_;
  const Clock& clock_;
  std::unique_ptr<boost::asio::io_context> ctx_;
  std::unique_ptr<http::HttpClient> client_;
  boost::asio::cancellation_signal cancel_;
  std::thread thread_;
  uint32_t failures_ = 0;  // the poller's thread only
  log::StateChangeLogger changes_{log::get("router")};
  std::atomic<uint64_t> polls_{0};
};

}  // namespace cgn::router::carbon
