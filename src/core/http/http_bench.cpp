// Benchmarks for the HTTP layer:
//  - keep-alive request/response round trips over loopback through Server and
//    the client pool (requests/s), with nginx serving the same request through
//    the same client as the baseline (skipped when nginx is not installed);
//  - SSE events streamed server -> client over loopback (events/s);
//  - the SSE parser on a real vLLM capture (events/s), against a naive
//    split-on-blank-line parser as the baseline.
#include <benchmark/benchmark.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/http/client.h"
#include "core/http/server.h"
#include "core/http/sse.h"
#include "testing/process.h"

namespace cgn::http {
namespace {

asio::awaitable<void> pong(Exchange& ex) {
  (void)co_await ex.respond(make_response(200, "pong", "text/plain"));
}

asio::awaitable<void> round_trips(benchmark::State& state, HttpClient& client, Upstream up) {
  for (auto _ : state) {
    Request req{Verb::get, "/ping", 11};
    auto r = co_await client.send(up, std::move(req));
    if (!r || r->body() != "pong") {
      state.SkipWithError(r ? "unexpected body" : r.error().message.c_str());
      break;
    }
  }
}

void run_round_trips(benchmark::State& state, const Upstream& up) {
  asio::io_context ctx;
  HttpClient client(ctx);
  asio::co_spawn(ctx, round_trips(state, client, up), asio::detached);
  ctx.run();
  state.SetItemsProcessed(state.iterations());
  state.counters["connections"] = static_cast<double>(client.connections_opened());
}

void BM_KeepAliveRoundTrip_CgnServer(benchmark::State& state) {
  RouteTable rt;
  rt.get("/ping", pong);
  ServerConfig cfg;
  Server server(cfg, std::move(rt));
  auto port = server.start();
  if (!port) {
    state.SkipWithError(port.error().message.c_str());
    return;
  }
  run_round_trips(state, Upstream{"127.0.0.1", *port});
  server.stop(std::chrono::milliseconds(100));
}
BENCHMARK(BM_KeepAliveRoundTrip_CgnServer)->UseRealTime();

// nginx (one worker) answering the same request: the throughput bar the router must meet.
class Nginx {
 public:
  Nginx() {
    if (!std::filesystem::exists("/usr/sbin/nginx")) {
      return;
    }
    char tmpl[] = "/tmp/cgn-bench-nginx-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      return;
    }
    dir_ = tmpl;
    {
      asio::io_context tmp;
      asio::ip::tcp::acceptor a(tmp, {asio::ip::make_address("127.0.0.1"), 0});
      port_ = a.local_endpoint().port();
    }
    std::ofstream conf(dir_ + "/nginx.conf");
    conf << "worker_processes 1;\ndaemon off;\nerror_log " << dir_ << "/error.log;\npid " << dir_
         << "/nginx.pid;\nevents { worker_connections 1024; }\nhttp {\n access_log off;\n"
         << " client_body_temp_path " << dir_ << ";\n proxy_temp_path " << dir_ << ";\n fastcgi_temp_path "
         << dir_ << ";\n uwsgi_temp_path " << dir_ << ";\n scgi_temp_path " << dir_ << ";\n"
         << " keepalive_requests 100000000;\n server { listen 127.0.0.1:" << port_
         << ";\n  location /ping { default_type text/plain; return 200 \"pong\"; }\n }\n}\n";
    conf.close();
    const std::string c = dir_ + "/nginx.conf";
    const char* argv[] = {"/usr/sbin/nginx", "-c", c.c_str(), "-p", dir_.c_str(), nullptr};
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) {
      pid_ = -1;
      return;
    }
    // Wait (bounded) until it accepts connections.
    for (int i = 0; i < 200; ++i) {
      asio::io_context tmp;
      asio::ip::tcp::socket s(tmp);
      boost::system::error_code ec;
      s.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
      if (!ec) {
        ready_ = true;
        break;
      }
      std::this_thread::sleep_for(
          std::chrono::milliseconds(10));  // process start-up, not synchronisation of results
    }
  }
  ~Nginx() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  bool ready() const { return ready_; }
  uint16_t port() const { return port_; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool ready_ = false;
};

void BM_KeepAliveRoundTrip_NginxBaseline(benchmark::State& state) {
  Nginx nginx;
  if (!nginx.ready()) {
    state.SkipWithError("nginx not available");
    return;
  }
  run_round_trips(state, Upstream{"127.0.0.1", nginx.port()});
}
BENCHMARK(BM_KeepAliveRoundTrip_NginxBaseline)->UseRealTime();

// ---------------------------------------------------------------------------
// SSE over loopback: one stream of N events per iteration.

constexpr int kEventsPerStream = 1000;

asio::awaitable<void> sse_source(Exchange& ex) {
  if (!co_await ex.begin_sse()) {
    co_return;
  }
  SseEvent e;
  e.data =
      R"({"id":"chatcmpl-x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]})";
  for (int i = 0; i < kEventsPerStream; ++i) {
    if (!co_await ex.write_event(e)) {
      co_return;
    }
  }
  e.data = "[DONE]";
  (void)co_await ex.write_event(e);
}

asio::awaitable<void> sse_sink(benchmark::State& state, HttpClient& client, Upstream up) {
  int64_t events = 0;
  for (auto _ : state) {
    auto s = co_await client.stream(up, Request{Verb::get, "/sse", 11});
    if (!s) {
      state.SkipWithError(s.error().message.c_str());
      break;
    }
    for (;;) {
      auto ev = co_await s->next_event();
      if (!ev || !ev->has_value()) {
        break;
      }
      ++events;
    }
  }
  state.SetItemsProcessed(events);
}

void BM_SseStreamLoopback(benchmark::State& state) {
  RouteTable rt;
  rt.get("/sse", sse_source);
  Server server(ServerConfig{}, std::move(rt));
  auto port = server.start();
  if (!port) {
    state.SkipWithError(port.error().message.c_str());
    return;
  }
  asio::io_context ctx;
  HttpClient client(ctx);
  asio::co_spawn(ctx, sse_sink(state, client, Upstream{"127.0.0.1", *port}), asio::detached);
  ctx.run();
  server.stop(std::chrono::milliseconds(100));
}
BENCHMARK(BM_SseStreamLoopback)->UseRealTime();

// ---------------------------------------------------------------------------
// SSE parser

std::string capture() {
  std::string one = cgn::testing::read_file(cgn::testing::sample_path("vllm-chat-stream-include-usage.sse"));
  if (one.empty()) {
    one = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";
  }
  std::string many;
  while (many.size() < (1 << 20)) {
    many += one;
  }
  return many;
}

void BM_SseParser(benchmark::State& state) {
  const std::string text = capture();
  int64_t events = 0;
  for (auto _ : state) {
    SseParser p;
    for (size_t i = 0; i < text.size(); i += 1460) {  // TCP-segment-sized pieces
      (void)p.feed(std::string_view(text).substr(i, 1460));
    }
    SseEvent e;
    while (p.pop(e)) {
      ++events;
      benchmark::DoNotOptimize(e.data.data());
    }
  }
  state.SetItemsProcessed(events);
  state.SetBytesProcessed(static_cast<int64_t>(text.size()) * state.iterations());
}
BENCHMARK(BM_SseParser);

// Baseline: whole buffer, split on "\n\n", strip "data: " — no CR, comments or limits.
void BM_SseNaiveSplitBaseline(benchmark::State& state) {
  const std::string text = capture();
  int64_t events = 0;
  for (auto _ : state) {
    size_t start = 0;
    for (size_t end; (end = text.find("\n\n", start)) != std::string::npos; start = end + 2) {
      std::string_view block(text.data() + start, end - start);
      if (block.substr(0, 6) == "data: ") {
        std::string data(block.substr(6));
        benchmark::DoNotOptimize(data.data());
        ++events;
      }
    }
  }
  state.SetItemsProcessed(events);
  state.SetBytesProcessed(static_cast<int64_t>(text.size()) * state.iterations());
}
BENCHMARK(BM_SseNaiveSplitBaseline);

}  // namespace
}  // namespace cgn::http

BENCHMARK_MAIN();
