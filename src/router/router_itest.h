// Helpers for the router's in-process integration tests (gateway_itest.cpp, disagg_itest.cpp,
// dispatcher_itest.cpp, router_app_itest.cpp, and any test that talks to a router or a fake
// engine on loopback): a blocking HTTP client over http::HttpClient on its own io_context, one
// request in a fresh context, and an OpenAI chat body. Test-only: never part of the library.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/http/client.h"
#include "router/coro_warnings.h"
#include "testing/run_on.h"

namespace cgn::router::itest {

namespace asio = boost::asio;

using cgn::testing::run_on;

struct Reply {
  unsigned status = 0;
  http::Fields headers;
  std::string body;
  std::vector<std::string> events;  // SSE data fields, in order
  bool failed = false;              // transport error
  std::string header(std::string_view name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : std::string(it->value());
  }
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// A blocking client over HttpClient, on its own io_context.
class Client {
 public:
  explicit Client(uint16_t port, bool tls = false, http::ClientConfig cc = {})
      : port_(port), tls_(tls), client_(ctx_, std::move(cc)) {}

  http::Request make(http::Verb verb, std::string target, std::string body, const Headers& headers) {
    http::Request req{verb, std::move(target), 11};
    for (const auto& [k, v] : headers) {
      req.set(k, v);
    }
    if (verb == http::Verb::post) {
      req.set(http::Field::content_type, "application/json");
    }
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  Reply send(http::Verb verb, std::string target, std::string body = "", const Headers& headers = {}) {
    auto res = run_on(ctx_, client_.send(up(), make(verb, std::move(target), std::move(body), headers)));
    Reply r;
    if (!res) {
      r.failed = true;
      return r;
    }
    r.status = res->result_int();
    r.headers = res->base();
    r.body = res->body();
    return r;
  }
  Reply post(std::string target, std::string body, const Headers& headers = {}) {
    return send(http::Verb::post, std::move(target), std::move(body), headers);
  }
  Reply get(std::string target, const Headers& headers = {}) {
    return send(http::Verb::get, std::move(target), "", headers);
  }

  // A streaming request read to the end, event by event.
  Reply stream(std::string target, std::string body, const Headers& headers = {}) {
    Reply r;
    auto s = open(std::move(target), std::move(body), headers);
    if (!s) {
      r.failed = true;
      return r;
    }
    r.status = s->status();
    r.headers = s->headers();
    for (;;) {
      auto ev = run_on(ctx_, s->next_event());
      if (!ev) {
        r.failed = true;
        break;
      }
      if (!ev->has_value()) {
        break;
      }
      r.events.push_back((*ev)->data);
    }
    return r;
  }

  std::optional<http::ClientStream> open(std::string target, std::string body, const Headers& headers = {}) {
    auto s = run_on(
        ctx_, client_.stream(up(), make(http::Verb::post, std::move(target), std::move(body), headers)));
    if (!s) {
      return std::nullopt;
    }
    return std::move(*s);
  }
  std::optional<std::string> next_event(http::ClientStream& s) {
    auto ev = run_on(ctx_, s.next_event());
    if (!ev || !ev->has_value()) {
      return std::nullopt;
    }
    return (*ev)->data;
  }

 private:
  http::Upstream up() const { return http::Upstream{"127.0.0.1", port_, tls_}; }
  uint16_t port_;
  bool tls_;
  asio::io_context ctx_;
  http::HttpClient client_;
};

inline std::string chat_body(const std::string& content, bool stream = false,
                             const std::string& model = "test-model") {
  nlohmann::json j = {{"model", model}, {"messages", {{{"role", "user"}, {"content", content}}}}};
  if (stream) {
    j["stream"] = true;
  }
  return j.dump();
}

// One request to 127.0.0.1:`port` on a fresh context (the result wrapped: use_future needs a
// default-constructible type; the upstream named: no temporaries in a co_await, GCC 12).
inline asio::awaitable<std::optional<http::HttpResult<http::Response>>> send_on(http::HttpClient& c,
                                                                                uint16_t port,
                                                                                http::Request req) {
  const http::Upstream up{"127.0.0.1", port, false};
  auto res = co_await c.send(up, std::move(req));
  co_return res;
}

inline http::HttpResult<http::Response> send_request(uint16_t port, http::Request req) {
  asio::io_context ctx;
  http::HttpClient client(ctx);
  auto fut = asio::co_spawn(ctx, send_on(client, port, std::move(req)), asio::use_future);
  ctx.run();
  return *fut.get();
}

}  // namespace cgn::router::itest
