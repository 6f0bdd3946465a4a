// Test stand-in for HTTP sensors (dcgm-exporter, a Redfish BMC): a real HTTP server on loopback
// port 0 whose answers a test scripts per (method, path) and may change while it runs; every
// request is recorded. HTTPS when the ServerConfig given carries a certificate. Header only; test
// code.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/http/server.h"

namespace cgn::power::testing {

class FakeHttp {
 public:
  using Answer = std::function<http::Response(const http::Request&)>;

  explicit FakeHttp(http::ServerConfig config = {}) : tls_(!config.tls_cert_file.empty()) {
    http::RouteTable routes;
    routes.set_fallback([this](http::Exchange& ex) -> boost::asio::awaitable<void> {
      http::Response res = answer(ex.request());
      co_await ex.respond(std::move(res));
    });
    server_ = std::make_unique<http::Server>(std::move(config), std::move(routes));
    port_ = server_->start().value();
  }
  ~FakeHttp() { server_->stop(std::chrono::milliseconds(0)); }

  uint16_t port() const { return port_; }
  std::string url(const std::string& path = "") const {
    return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_) + path;
  }

  void on(http::Verb method, std::string path, Answer a) {
    std::lock_guard lock(mu_);
    answers_[{method, std::move(path)}] = std::move(a);
  }
  void serve(std::string path, std::string body, std::string type = "text/plain; version=0.0.4") {
    on(http::Verb::get, std::move(path),
       [body = std::move(body), type](const http::Request&) { return http::make_response(200, body, type); });
  }
  std::vector<http::Request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  http::Response answer(const http::Request& req) {
    Answer a;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(req);
      auto it = answers_.find({req.method(), std::string(http::path_of(req.target()))});
      if (it == answers_.end()) {
        return http::make_response(404, "{\"error\":\"not found\"}");
      }
      a = it->second;
    }
    return a(req);
  }

  mutable std::mutex mu_;
  std::map<std::pair<http::Verb, std::string>, Answer> answers_;
  std::vector<http::Request> requests_;
  bool tls_ = false;
  std::unique_ptr<http::Server> server_;
  uint16_t port_ = 0;
};

}  // namespace cgn::power::testing
