#include "power/http_fetch.h"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <future>
#include <optional>

#include "core/host_port.h"

namespace cgn::power {

namespace asio = boost::asio;

Result<HttpTarget, SourceError> parse_http_url(std::string_view url) {
  HttpTarget t;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
    t.upstream.tls = true;
  } else {
    return make_error(SourceError::kConfig, fmt::format("\"{}\" is not an http:// or https:// URL", url));
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  t.path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  bool has_port =
      !authority.empty() && authority.back() != ']' && authority.find(':') != std::string_view::npos;
  auto hp = split_host_port(has_port ? std::string(authority)
                                     : fmt::format("{}:{}", authority, t.upstream.tls ? 443 : 80));
  if (!hp) {
    return make_error(SourceError::kConfig, fmt::format("\"{}\" has no valid host and port", url));
  }
  t.upstream.host = hp->first;
  t.upstream.port = hp->second;
  return t;
}

BlockingHttp::BlockingHttp(std::chrono::milliseconds timeout, std::string ca_file) : timeout_(timeout) {
  http::ClientConfig cfg;
  cfg.tls_ca_file = std::move(ca_file);
  cfg.timeouts.connect = timeout;
  cfg.timeouts.header = timeout;
  cfg.timeouts.body = timeout;
  cfg.timeouts.idle = timeout;
  cfg.max_body_bytes = size_t{16} << 20;
  cfg.timer_resolution = std::chrono::milliseconds(10);
  client_ = std::make_unique<http::HttpClient>(ctx_, cfg);
}

BlockingHttp::~BlockingHttp() {
  client_.reset();
  ctx_.restart();
  ctx_.poll();
}

namespace {

asio::awaitable<std::optional<http::HttpResult<http::Response>>> exchange(http::HttpClient& c,
                                                                          http::Upstream up,
                                                                          http::Request req) {
  co_return co_await c.send(up, std::move(req));
}

}  // namespace

Result<http::Response, SourceError> BlockingHttp::send(const http::Upstream& up, http::Request req) {
  auto fut = asio::co_spawn(ctx_, exchange(*client_, up, std::move(req)), asio::use_future);
  ctx_.restart();
  // The client's own deadlines end the exchange; the outer bound only guards against a stuck loop.
  auto give_up = std::chrono::steady_clock::now() + 4 * timeout_ + std::chrono::seconds(1);
  while (fut.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    if (std::chrono::steady_clock::now() > give_up) {
      ctx_.stop();
      return make_error(SourceError::kUnavailable, "HTTP exchange did not finish");
    }
    ctx_.run_one_for(std::chrono::milliseconds(20));
  }
  auto got = *fut.get();
  if (!got.ok()) {
    return make_error(SourceError::kUnavailable,
                      fmt::format("{}:{}: {} ({})", up.host, up.port, http::to_string(got.error().code),
                                  got.error().message));
  }
  return std::move(got.value());
}

}  // namespace cgn::power
