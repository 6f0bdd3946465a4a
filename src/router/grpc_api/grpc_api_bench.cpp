// Generate over gRPC against the same request over HTTP, in one run, through one router: a
// RouterApp on loopback in front of an in-process FakeEngine (no token delay), with
// [router.grpc] on. Each iteration is one whole request from a client that keeps its connection:
//   BM_Http/buffered, BM_Grpc/buffered          a buffered chat request (1 token)
//   BM_Http/tokens:N, BM_Grpc/tokens:N          a streamed chat request of N tokens, read to the end
// The gRPC time minus the HTTP time is the added latency per request; the slope between the
// streamed sizes ((t(64) - t(1)) / 63) is the time per streamed token of each protocol.
// scripts/bench-grpc.sh runs it and writes the table.
#include <benchmark/benchmark.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cognitora/v1/router.grpc.pb.h"
#include "core/http/client.h"
#include "router/coro_warnings.h"
#include "router/fake_engine.h"
#include "router/router_app.h"
#include "testing/process.h"
#include "testing/run_on.h"

namespace {

namespace v1 = cognitora::v1;
namespace asio = boost::asio;
using namespace cgn;

struct Setup {
  router::testing::FakeEngine engine{"bench"};
  std::unique_ptr<router::RouterApp> app;
  std::shared_ptr<grpc::Channel> channel;

  Setup() {
    engine.start();
    std::vector<std::string> flags{"cgn-router", "--listen",           "127.0.0.1:0", "--log-level",
                                   "warn",       "--threads",          "2",           "--node",
                                   engine.url(), "--poll-interval-ms", "100"};
    std::vector<const char*> argv;
    for (const auto& f : flags) {
      argv.push_back(f.c_str());
    }
    auto setup = router::parse_router_options(static_cast<int>(argv.size()), argv.data(), ".", "");
    setup->config.router.grpc.listen = "127.0.0.1:0";
    app = std::make_unique<router::RouterApp>(std::move(*setup));
    if (!app->start()) {
      std::abort();
    }
    testing::wait_until([&] { return app->gateway()->healthy_nodes() == 1; }, std::chrono::seconds(30));
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(app->grpc_port()),
                                  grpc::InsecureChannelCredentials());
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

std::string chat_body(bool stream) {
  nlohmann::json j = {{"model", "test-model"}, {"messages", {{{"role", "user"}, {"content", "bench"}}}}};
  if (stream) {
    j["stream"] = true;
    j["stream_options"] = {{"include_usage", true}};
  }
  return j.dump();
}

asio::awaitable<size_t> http_once(http::HttpClient& c, uint16_t port, bool stream) {
  http::Request req{http::Verb::post, "/v1/chat/completions", 11};
  req.set(http::Field::host, "127.0.0.1");
  req.set(http::Field::content_type, "application/json");
  req.body() = chat_body(stream);
  req.prepare_payload();
  const http::Upstream up{"127.0.0.1", port, false};
  auto s = co_await c.stream(up, std::move(req));
  if (!s || s->status() != 200) {
    co_return 0;
  }
  if (!stream) {
    auto body = co_await s->read_all();
    co_return body ? 1 : 0;
  }
  size_t events = 0;
  for (;;) {
    auto ev = co_await s->next_event();
    if (!ev || !ev->has_value()) {
      break;
    }
    ++events;
  }
  co_return events;
}

void run_http(benchmark::State& state, bool stream) {
  auto& s = setup();
  s.engine.tokens = static_cast<int>(state.range(0));
  asio::io_context ctx;
  http::HttpClient client(ctx);
  for (auto _ : state) {
    if (testing::run_on(ctx, http_once(client, s.app->port(), stream)) == 0) {
      state.SkipWithError("the HTTP request failed");
      break;
    }
  }
  state.counters["tokens"] = static_cast<double>(state.range(0));
}

void run_grpc(benchmark::State& state, bool stream) {
  auto& s = setup();
  s.engine.tokens = static_cast<int>(state.range(0));
  auto stub = v1::Router::NewStub(s.channel);
  v1::GenerateRequest req;
  req.set_model("test-model");
  auto* m = req.add_messages();
  m->set_role("user");
  m->set_content("bench");
  req.set_buffered(!stream);
  for (auto _ : state) {
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, req);
    v1::GenerateResponse msg;
    while (reader->Read(&msg)) {
    }
    if (!reader->Finish().ok()) {
      state.SkipWithError("the gRPC call failed");
      break;
    }
  }
  state.counters["tokens"] = static_cast<double>(state.range(0));
}

void BM_Http_Buffered(benchmark::State& state) {
  run_http(state, false);
}
void BM_Grpc_Buffered(benchmark::State& state) {
  run_grpc(state, false);
}
void BM_Http_Stream(benchmark::State& state) {
  run_http(state, true);
}
void BM_Grpc_Stream(benchmark::State& state) {
  run_grpc(state, true);
}

BENCHMARK(BM_Http_Buffered)->Arg(1)->ArgName("tokens")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Grpc_Buffered)->Arg(1)->ArgName("tokens")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Http_Stream)->Arg(1)->Arg(64)->ArgName("tokens")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Grpc_Stream)->Arg(1)->Arg(64)->ArgName("tokens")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
