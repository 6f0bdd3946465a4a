#include "router/intake.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "core/http/proxy_headers.h"
#include "core/log.h"
#include "router/router_log.h"

namespace cgn::router {

namespace {

constexpr size_t kMaxRequestIdBytes = 128;

}  // namespace

RejectionLog::RejectionLog(RouterMetrics& metrics, std::chrono::milliseconds interval, size_t max_clients)
    : metrics_(metrics), interval_(interval), max_clients_(std::max<size_t>(1, max_clients)) {}

void RejectionLog::note(std::string_view reason, std::string_view remote) {
  metrics_.rejected(reason);
  const std::string_view addr = remote.empty() ? std::string_view("unknown") : http::peer_address(remote);
  std::string key;
  key.reserve(reason.size() + 1 + addr.size());
  key.append(reason).append(" ").append(addr);
  const auto now = std::chrono::steady_clock::now();
  uint64_t suppressed = 0;
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(key);
    if (it != clients_.end() && now - it->second.logged < interval_) {
      ++it->second.suppressed;
      return;
    }
    if (it == clients_.end()) {
      if (clients_.size() >= max_clients_) {
        // Forget clients whose interval is over; if all are recent (a flood from many addresses),
        // start afresh: the table stays bounded and the worst case is one more line per address.
        std::erase_if(clients_, [&](const auto& c) { return now - c.second.logged >= interval_; });
        if (clients_.size() >= max_clients_) {
          clients_.clear();
        }
      }
      it = clients_.emplace(std::move(key), Client{}).first;
    }
    suppressed = it->second.suppressed;
    it->second = Client{now, 0};
    ++lines_;
  }
  CGN_LOG_WARN(router_log(), "request refused", log::kv("reason", reason), log::kv("client", addr),
               log::kv("suppressed", suppressed),
               log::kv("interval_s", std::chrono::duration<double>(interval_).count()));
}

uint64_t RejectionLog::lines() const {
  std::lock_guard lock(mu_);
  return lines_;
}

RequestIds request_ids(const http::Request& req) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  RequestIds ids;
  ids.upstream = fmt::format("cgn-{:016x}{:016x}", rng(), rng());
  auto it = req.find("X-Request-Id");
  if (it != req.end()) {
    const std::string_view v = it->value();
    bool ok = !v.empty() && v.size() <= kMaxRequestIdBytes;
    for (char c : v) {
      ok = ok && c > 0x20 && c < 0x7f;
    }
    if (ok) {
      ids.client = std::string(v);
      return ids;
    }
  }
  ids.client = ids.upstream;
  return ids;
}

http::Response unauthorized_response(const http::Request& head) {
  http::Response res = http::make_error_response(
      unauthorized("Incorrect or missing API key: send 'Authorization: Bearer <key>'."));
  res.set("X-Request-Id", request_ids(head).client);
  return res;
}

std::optional<http::Response> check_head(const IntakeKeys& keys, RejectionLog& log, const http::Request& head,
                                         std::string_view remote) {
  const std::string_view path = http::path_of(head.target());
  const std::string_view auth = head[http::Field::authorization];
  if (path.starts_with("/v1/")) {
    if (keys.api == nullptr || keys.api->check_authorization(auth)) {
      return std::nullopt;
    }
    log.note(reject_reason::kAuth, remote);
    return unauthorized_response(head);
  }
  // A CORS preflight carries no credentials: it is answered without a key.
  if (path == "/metrics" && head.method() != http::Verb::options && keys.metrics != nullptr &&
      !keys.metrics->check_authorization(auth)) {
    log.note(reject_reason::kMetricsAuth, remote);
    return http::make_error_response(
        unauthorized("Incorrect or missing metrics key: send 'Authorization: Bearer <metrics key>'."));
  }
  return std::nullopt;
}

}  // namespace cgn::router
