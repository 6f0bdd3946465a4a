// Helpers for the router's e2e suites (router_e2e.cpp, disagg_e2e.cpp): the real cgn-router
// binary (--config, --port-file) over real cgn-engine-sim processes (vLLM flavour, --port 0
// --port-file) on loopback, blocking HTTP clients, and a raw socket that holds a request open or
// walks away from it. Everything waits on observable state with a deadline, never on sleeps.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/http/client.h"
#include "router/coro_warnings.h"
#include "testing/engine_sim.h"
#include "testing/metrics_page.h"
#include "testing/process.h"
#include "testing/stream_capture.h"

namespace cgn::router::e2e {

using namespace std::chrono_literals;
using nlohmann::json;
namespace asio = boost::asio;
using cgn::testing::bin_path;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;

// ---- HTTP from the test -------------------------------------------------------------------

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Reply {
  unsigned status = 0;
  http::Fields headers;
  std::string body;                 // buffered answers, and non-200 stream answers
  std::vector<std::string> events;  // SSE data fields in order, "[DONE]" included
  std::string error;                // transport error; empty when none
  std::string header(std::string_view name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : std::string(it->value());
  }
  json json_body() const { return json::parse(body, nullptr, false); }
};

inline http::Request make_request(http::Verb verb, const std::string& target, const std::string& body,
                                  const Headers& headers) {
  http::Request req{verb, target, 11};
  if (verb == http::Verb::post) {
    req.set(http::Field::content_type, "application/json");
  }
  for (const auto& [k, v] : headers) {
    req.set(k, v);
  }
  req.body() = body;
  req.prepare_payload();
  return req;
}

inline http::ClientConfig client_config() {
  http::ClientConfig cfg;
  cfg.retry_stale = false;
  cfg.tls_verify = false;
  cfg.timeouts.connect = 5s;
  cfg.timeouts.header = 60s;
  cfg.timeouts.body = 60s;
  cfg.timeouts.idle = 60s;
  return cfg;
}

// GCC 12 miscompiles temporaries in coroutine frames (a temporary in a co_await's arguments is
// freed twice): the coroutines name every object and return optionals (use_future needs a
// default-constructible result); results are converted outside them.
inline asio::awaitable<std::optional<Reply>> do_call(http::HttpClient& c, uint16_t port, http::Request req) {
  std::optional<Reply> out(std::in_place);
  Reply& r = *out;
  const http::Upstream up{"127.0.0.1", port, false};
  auto res = co_await c.send(up, std::move(req));
  if (!res) {
    r.error = res.error().message;
    r.error += " ";
    co_return out;
  }
  r.status = res->result_int();
  for (const auto& f : *res) {
    r.headers.insert(f.name_string(), f.value());
  }
  r.body = res->body();
  co_return out;
}

inline asio::awaitable<std::optional<Reply>> do_stream(http::HttpClient& c, uint16_t port,
                                                       http::Request req) {
  // A named Upstream: GCC 12 destroys a temporary in a co_await expression too early.
  const http::Upstream up{"127.0.0.1", port, false};
  cgn::testing::StreamCapture cap;
  co_await cgn::testing::capture_stream(c, up, std::move(req), cap);
  std::optional<Reply> out(std::in_place);
  out->status = cap.status;
  out->headers = std::move(cap.headers);
  out->body = std::move(cap.body);
  out->events = std::move(cap.events);
  out->error = std::move(cap.error);
  co_return out;
}

inline Reply run(asio::awaitable<std::optional<Reply>> (*fn)(http::HttpClient&, uint16_t, http::Request),
                 uint16_t port, http::Request req) {
  asio::io_context ctx;
  http::HttpClient client(ctx, client_config());
  auto fut = asio::co_spawn(ctx, fn(client, port, std::move(req)), asio::use_future);
  ctx.run();
  return *fut.get();
}

inline Reply post(uint16_t port, const std::string& target, const std::string& body, const Headers& h = {}) {
  return run(do_call, port, make_request(http::Verb::post, target, body, h));
}
inline Reply get(uint16_t port, const std::string& target) {
  return run(do_call, port, make_request(http::Verb::get, target, "", {}));
}
inline Reply stream(uint16_t port, const std::string& target, const std::string& body,
                    const Headers& h = {}) {
  return run(do_stream, port, make_request(http::Verb::post, target, body, h));
}

// A raw blocking connection: sends one request and keeps the socket open (a client that holds
// a request in flight) until it reads what it waits for or is destroyed (a client that goes away).
class RawConn {
 public:
  RawConn(uint16_t port, const std::string& target, const std::string& body) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ADD_FAILURE() << "connect to " << port << " failed";
      return;
    }
    const std::string req = "POST " + target +
                            " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Content-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    EXPECT_EQ(::send(fd_, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  }
  ~RawConn() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  // Reads until `needle` has appeared `times` times in what was received, or `timeout` passes.
  bool read_until(std::string_view needle, int times, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int seen = 0;
      for (size_t at = got_.find(needle); at != std::string::npos; at = got_.find(needle, at + 1)) {
        ++seen;
      }
      if (seen >= times) {
        return true;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return false;
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        continue;
      }
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        return false;
      }
      got_.append(buf, static_cast<size_t>(n));
    }
  }
  const std::string& received() const { return got_; }

 private:
  int fd_ = -1;
  std::string got_;
};

// ---- bodies --------------------------------------------------------------------------------

// About 4 bytes per simulator token: n_tokens tokens of text no other salt shares.
inline std::string long_text(size_t n_tokens, int salt) {
  std::string s;
  for (size_t i = 0; s.size() < n_tokens * 4; ++i) {
    s += 'w' + std::to_string(salt) + '_' + std::to_string(i) + ' ';
  }
  return s.substr(0, n_tokens * 4);
}

inline std::string chat(const std::string& content, uint32_t max_tokens = 4, bool stream = false) {
  json j = {{"model", "m"},
            {"messages", json::array({{{"role", "user"}, {"content", content}}})},
            {"max_tokens", max_tokens},
            {"ignore_eos", true}};
  if (stream) {
    j["stream"] = true;
  }
  return j.dump();
}

// Series of a Prometheus page: src/testing/metrics_page.h (a missing series is never 0).
using cgn::testing::count_or_zero;
using cgn::testing::sample;

// ---- the processes -------------------------------------------------------------------------

// Writes a simulator fault-rules file (sim/fault_rules.h) into `dir`; returns the flags that load it.
inline std::vector<std::string> fault_rules_flags(const TempDir& dir, const std::string& rules) {
  cgn::testing::write_file(dir.file("fault-rules"), rules);
  return {"--fault-rules", dir.file("fault-rules")};
}

// One cgn-engine-sim (vLLM flavour, model "m") on a free port, with its admin endpoints (state())
// and vLLM's NixlConnector, whose side channel a P/D decode leg pulls from.
struct Sim {
  Sim(std::string n, std::vector<std::string> extra) : name(std::move(n)), engine(options(std::move(extra))) {
    EXPECT_GT(port, 0) << engine.log();
  }
  static cgn::testing::EngineSimOptions options(std::vector<std::string> extra) {
    cgn::testing::EngineSimOptions o;
    o.admin = true;
    o.args = {"--log-level", "warn", "--kv-transfer-config",
              R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})"};
    o.args.insert(o.args.end(), extra.begin(), extra.end());
    return o;
  }
  cgn::testing::Process& process() { return engine.process(); }
  json state() const { return json::parse(get(port, "/admin/state").body, nullptr, false); }
  int running() const {
    const json s = state();
    return s.is_object() ? s["running"].get<int>() + s["waiting"].get<int>() : -1;
  }
  std::string metrics() const { return get(port, "/metrics").body; }
  double finished(std::string_view reason) const {
    return sample(metrics(), "vllm:request_success_total{engine=\"0\",finished_reason=\"" +
                                 std::string(reason) + "\",model_name=\"m\"}")
        .value_or(-1);
  }

  std::string name;
  cgn::testing::EngineSim engine;
  uint16_t port = engine.port();
};

// One [[router.nodes]] entry.
struct NodeSpec {
  std::string name;
  uint16_t port = 0;
  std::string role = "both";
  std::string model = "m";  // the one model it serves
};

// The cgn-router binary over the given nodes, `healthy` of them healthy at return (all by
// default). `extra_toml` goes after [router.timeouts] (other [router.*] tables); `router_toml`
// holds more keys of [router] itself (api_keys_file, ...).
struct Router {
  Router(const std::vector<Sim*>& sims, const std::string& extra_toml = "",
         const std::string& router_toml = "")
      : Router(specs_of(sims), extra_toml, SIZE_MAX, router_toml) {}
  Router(const std::vector<NodeSpec>& nodes, const std::string& extra_toml, size_t healthy = SIZE_MAX,
         const std::string& router_toml = "") {
    std::string toml =
        "[router]\nlisten = \"127.0.0.1:0\"\npolicy = \"kv\"\n" + router_toml +
        "\n[router.timeouts]\nhealth_interval_ms = 100\nconnect_ms = 1000\nfirst_token_ms = 30000\n"
        "shutdown_grace_ms = 0\n" +
        extra_toml + "\n";
    for (const NodeSpec& n : nodes) {
      toml += "[[router.nodes]]\nname = \"" + n.name +
              "\"\nurl = \"http://127.0.0.1:" + std::to_string(n.port) + "\"\nrole = \"" + n.role +
              "\"\nmodels = [\"" + n.model + "\"]\n";
    }
    cgn::testing::write_file(dir.file("cognitora.toml"), toml);
    proc = std::make_unique<Process>(std::vector<std::string>{bin_path("cgn-router"), "--config",
                                                              dir.file("cognitora.toml"), "--port-file",
                                                              dir.file("port"), "--threads", "2"});
    port = static_cast<uint16_t>(cgn::testing::wait_for_port_file(dir.file("port"), *proc, 20s));
    EXPECT_GT(port, 0) << proc->describe() << "\n" << proc->log();
    const size_t n = healthy == SIZE_MAX ? nodes.size() : healthy;
    EXPECT_TRUE(wait_until(
        [&] {
          const json h = json::parse(get(port, "/health").body, nullptr, false);
          return h.is_object() && h["nodes_healthy"] == n;
        },
        20s))
        << proc->log();
  }
  static std::vector<NodeSpec> specs_of(const std::vector<Sim*>& sims) {
    std::vector<NodeSpec> out;
    for (const Sim* s : sims) {
      out.push_back(NodeSpec{s->name, s->port, "both"});
    }
    return out;
  }
  // NaN when the router does not expose `series` (testing/metrics_page.h).
  double metric(const std::string& series) const {
    return cgn::testing::metric(get(port, "/metrics").body, series);
  }
  // For negative checks on counters created by their first increment: 0 only when the family exists.
  double count(const std::string& series) const { return count_or_zero(get(port, "/metrics").body, series); }

  TempDir dir;
  std::unique_ptr<Process> proc;
  uint16_t port = 0;
};

}  // namespace cgn::router::e2e
