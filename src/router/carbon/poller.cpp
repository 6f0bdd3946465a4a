#include "router/carbon/poller.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/log.h"
#include "router/coro_warnings.h"

namespace cgn::router::carbon {

namespace asio = boost::asio;

Nanos next_delay(const PollerOptions& o, uint32_t failures, uint32_t retry_after_s) {
  Nanos d = o.interval;
  if (failures > 0) {
    const uint32_t shift = std::min<uint32_t>(failures - 1, 30);
    d = o.interval > (o.max_backoff >> shift) ? o.max_backoff : std::min(o.max_backoff, o.interval << shift);
  }
  return std::max<Nanos>(d, Nanos{retry_after_s} * kNanosPerSecond);
}

Poller::Poller(std::unique_ptr<Provider> provider, Gate& gate, PollerOptions options, const Clock& clock)
    : provider_(std::move(provider)), gate_(gate), options_(std::move(options)), clock_(clock) {}

Poller::~Poller() {
  stop();
}

void Poller::start() {
  if (thread_.joinable()) {
    return;
  }
  ctx_ = std::make_unique<asio::io_context>();
  http::ClientConfig cc;
  const auto t = std::chrono::milliseconds(options_.timeout / kNanosPerMilli);
  cc.timeouts.connect = t;
  cc.timeouts.header = t;
  cc.timeouts.body = t;
  cc.max_body_bytes = size_t{1} << 20;
  client_ = std::make_unique<http::HttpClient>(*ctx_, cc);
  asio::co_spawn(*ctx_, loop(), asio::bind_cancellation_slot(cancel_.slot(), asio::detached));
  thread_ = std::thread([this] { ctx_->run(); });
}

void Poller::stop() {
  if (!thread_.joinable()) {
    return;
  }
  asio::post(*ctx_, [this] { cancel_.emit(asio::cancellation_type::terminal); });
  thread_.join();
  client_.reset();
  ctx_.reset();
}

asio::awaitable<Nanos> Poller::poll_once() {
  const std::string key = std::string(provider_->name()) + "/" + provider_->zone();
  http::ClientTimeouts t = client_->config().timeouts;
  auto r = co_await provider_->fetch(*client_, t, clock_.now());
  if (r) {
    gate_.record(*r);
    failures_ = 0;
    changes_.update(key, "ok", spdlog::level::info, "carbon provider answering",
                    log::kv("provider", provider_->name()), log::kv("zone", provider_->zone()),
                    log::kv("gco2_per_kwh", r->gco2_per_kwh));
    co_return next_delay(options_, 0, 0);
  }
  ++failures_;
  const FetchError& e = r.error().code;
  if (options_.on_failure) {
    options_.on_failure(e.reason);
  }
  const Nanos delay = next_delay(options_, failures_, e.retry_after_s);
  changes_.update(key, reason_label(e.reason), spdlog::level::warn, "carbon poll failed; backing off",
                  log::kv("provider", provider_->name()), log::kv("zone", provider_->zone()),
                  log::kv("error", r.error().message), log::kv("next_poll_ms", delay / kNanosPerMilli));
  co_return delay;
}

asio::awaitable<void> Poller::loop() {
  asio::steady_timer timer(*ctx_);
  for (;;) {
    const Nanos delay = co_await poll_once();
    // stop() during the poll: the signal went to the request, not to a timer not yet waited on.
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
      co_return;
    }
    gate_.set_next_poll(clock_.now() + delay);
    polls_.fetch_add(1, std::memory_order_release);
    timer.expires_after(std::chrono::nanoseconds(delay));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      co_return;
    }
  }
}

}  // namespace cgn::router::carbon
