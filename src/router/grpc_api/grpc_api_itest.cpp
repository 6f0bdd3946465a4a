// cognitora.v1.Router/Generate and grpc.health.v1 through a whole RouterApp: the real Gateway on
// loopback over in-process FakeEngines, the real gRPC listener, a grpc++ client. Streamed,
// buffered, cancelled (the engine sees its request closed), keys, admission, errors, mTLS,
// health and the metric.
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cognitora/v1/router.grpc.pb.h"
#include "core/log.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "router/fake_engine.h"
#include "router/grpc_api/server.h"
#include "router/grpc_api/translate.h"
#include "router/router_app.h"
#include "router/router_itest.h"
#include "testing/metrics_page.h"
#include "testing/process.h"
#include "testing/test_certs.h"

namespace cgn::router {
namespace {

namespace v1 = cognitora::v1;
using namespace std::chrono_literals;

constexpr auto kGenerous = 30s;
constexpr const char* kKey = "sk-grpc-test-0123456789abcdef";

struct RouterOpts {
  bool keys = false;
  uint32_t max_queue = 256;
  std::string tls_cert, tls_key, tls_client_ca;
  std::string grpc_listen = "127.0.0.1:0";
  std::string log_file;         // [log] file; empty: stderr
  uint64_t max_body_bytes = 0;  // [router.limits]; 0: the default
};

// cgn-router's setup over one FakeEngine, with [router.grpc] on 127.0.0.1:0; keys go to `dir`.
RouterSetup grpc_setup(testing::FakeEngine& engine, const RouterOpts& o, const cgn::testing::TempDir& dir) {
  std::vector<std::string> flags{
      "cgn-router", "--listen",    "127.0.0.1:0", "--node",    engine.url(), "--poll-interval-ms",
      "50",         "--log-level", "warn",        "--threads", "2"};
  std::vector<const char*> argv;
  for (const auto& f : flags) {
    argv.push_back(f.c_str());
  }
  auto setup = parse_router_options(static_cast<int>(argv.size()), argv.data(), ".", "");
  EXPECT_TRUE(setup) << setup.error().message;
  if (o.keys) {
    std::ofstream(dir.file("keys")) << kKey << "\n";
    setup->config.router.api_keys_file = dir.file("keys");
  }
  setup->gateway.router.admission.max_queue = o.max_queue;
  if (o.max_body_bytes != 0) {
    setup->config.router.limits.max_body_bytes = o.max_body_bytes;
    setup->gateway.router.limits.max_body_bytes = o.max_body_bytes;
  }
  auto& g = setup->config.router.grpc;
  g.listen = o.grpc_listen;
  setup->config.log.file = o.log_file;
  g.tls_cert = o.tls_cert;
  g.tls_key = o.tls_key;
  g.tls_client_ca = o.tls_client_ca;
  return std::move(*setup);
}

// A started RouterApp over one FakeEngine whose node is healthy.
class Router {
 public:
  explicit Router(testing::FakeEngine& engine, const RouterOpts& o = {})
      : host_(o.grpc_listen.starts_with("[::1]") ? "[::1]" : "127.0.0.1") {
    app_ = std::make_unique<RouterApp>(grpc_setup(engine, o, dir_));
    auto port = app_->start();
    EXPECT_TRUE(port) << port.error().message;
    EXPECT_TRUE(cgn::testing::wait_until([&] { return app_->gateway()->healthy_nodes() == 1; }, kGenerous));
  }

  RouterApp& app() { return *app_; }
  std::string target() const { return host_ + ":" + std::to_string(app_->grpc_port()); }
  std::shared_ptr<grpc::Channel> channel(
      const std::shared_ptr<grpc::ChannelCredentials>& creds = grpc::InsecureChannelCredentials()) const {
    return grpc::CreateChannel(target(), creds);
  }
  double metric(std::string_view series) {
    return cgn::testing::metric(app_->gateway()->render_metrics(), series);
  }

 private:
  std::string host_;
  cgn::testing::TempDir dir_;
  std::unique_ptr<RouterApp> app_;
};

v1::GenerateRequest chat(const std::string& text, const std::string& model = "test-model") {
  v1::GenerateRequest r;
  r.set_model(model);
  auto* m = r.add_messages();
  m->set_role("user");
  m->set_content(text);
  return r;
}

struct Call {
  grpc::Status status;
  std::vector<v1::GenerateResponse> messages;
  std::string retry_after;  // the `retry-after` trailing metadata
  std::string text() const {
    std::string t;
    for (const auto& m : messages) {
      t += m.text();
    }
    return t;
  }
};

Call generate(grpc::Channel& ch, const v1::GenerateRequest& req, const std::string& key = "",
              std::chrono::milliseconds deadline = kGenerous) {
  auto stub = v1::Router::NewStub(std::shared_ptr<grpc::Channel>(&ch, [](grpc::Channel*) {}));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  if (!key.empty()) {
    ctx.AddMetadata("authorization", "Bearer " + key);
  }
  Call c;
  auto reader = stub->Generate(&ctx, req);
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    c.messages.push_back(msg);
  }
  c.status = reader->Finish();
  const auto& trailers = ctx.GetServerTrailingMetadata();
  if (auto it = trailers.find("retry-after"); it != trailers.end()) {
    c.retry_after.assign(it->second.data(), it->second.size());
  }
  return c;
}

std::string http_text(uint16_t port, bool stream) {
  itest::Client cl(port);
  if (!stream) {
    auto r = cl.post("/v1/chat/completions", itest::chat_body("hello"));
    return r.json()["choices"][0]["message"]["content"].get<std::string>();
  }
  auto r = cl.stream("/v1/chat/completions", itest::chat_body("hello", true));
  std::string t;
  for (const auto& e : r.events) {
    auto j = nlohmann::json::parse(e, nullptr, false);
    if (j.is_object() && !j["choices"].empty() && j["choices"][0]["delta"].contains("content")) {
      t += j["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  return t;
}

TEST(GrpcApi, StreamedGenerateRelaysEveryDeltaWithNodeFinishAndUsage) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  Router r(engine);
  auto ch = r.channel();
  Call c = generate(*ch, chat("hello"));
  ASSERT_TRUE(c.status.ok()) << c.status.error_message();
  ASSERT_GE(c.messages.size(), 3u);  // tokens, finish, usage: one message each
  EXPECT_EQ(c.messages.front().node(), "127.0.0.1:" + std::to_string(engine.port()));
  EXPECT_FALSE(c.messages.front().request_id().empty());
  EXPECT_EQ(c.text(), http_text(r.app().port(), true));
  EXPECT_FALSE(c.text().empty());
  bool finished = false;
  for (const auto& m : c.messages) {
    finished = finished || m.finish_reason() == "stop";
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(c.messages.back().usage().completion_tokens(), 4u);
  EXPECT_EQ(engine.generations.load(), 2);  // one gRPC, one HTTP
  EXPECT_EQ(r.metric(R"(cgn_router_grpc_requests_total{method="Generate",code="OK"})"), 1.0);
}

TEST(GrpcApi, BufferedGenerateIsOneMessageAndPromptGoesToCompletions) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  Router r(engine);
  auto ch = r.channel();
  auto req = chat("hello");
  req.set_buffered(true);
  req.set_max_tokens(4);
  req.set_extensions_json(R"({"response_format":{"type":"json_object"}})");
  Call c = generate(*ch, req);
  ASSERT_TRUE(c.status.ok()) << c.status.error_message();
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.text(), http_text(r.app().port(), false));
  EXPECT_EQ(c.messages[0].finish_reason(), "stop");
  EXPECT_FALSE(c.messages[0].node().empty());
  const auto seen = engine.seen();
  ASSERT_FALSE(seen.empty());
  auto body = nlohmann::json::parse(seen.front().body);
  EXPECT_EQ(body["response_format"]["type"], "json_object");
  EXPECT_EQ(body["max_tokens"], 4);
  EXPECT_EQ(seen.front().target, "/v1/chat/completions");

  v1::GenerateRequest prompt;
  prompt.set_model("test-model");
  prompt.set_prompt("once upon");
  prompt.set_buffered(true);
  Call p = generate(*ch, prompt);
  ASSERT_TRUE(p.status.ok()) << p.status.error_message();
  EXPECT_FALSE(p.text().empty());
  EXPECT_EQ(engine.seen().back().target, "/v1/completions");
}

// A call streaming for ever (the fake engine sends 100000 tokens 5 ms apart), its first message
// read.
struct EndlessStream {
  EndlessStream() {
    EXPECT_NE(engine.start(), 0);
    engine.tokens = 100000;
    engine.token_delay_ms = 5;
    r = std::make_unique<Router>(engine);
    stub = v1::Router::NewStub(r->channel());
    reader = stub->Generate(&ctx, chat("long"));
    first = reader->Read(&msg);
  }
  testing::FakeEngine engine{"e"};
  std::unique_ptr<Router> r;
  std::unique_ptr<v1::Router::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  v1::GenerateResponse msg;
  bool first = false;
};

TEST(GrpcApi, CancellingMidStreamClosesTheEnginesRequest) {
  EndlessStream s;
  testing::FakeEngine& engine = s.engine;
  auto& reader = s.reader;
  v1::GenerateResponse& msg = s.msg;
  Router& r = *s.r;
  ASSERT_TRUE(s.first);
  ASSERT_TRUE(reader->Read(&msg));
  s.ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(cgn::testing::wait_until([&] { return engine.cancelled.load() == 1; }, kGenerous));
  EXPECT_EQ(engine.completed.load(), 0);
  EXPECT_TRUE(
      cgn::testing::wait_until([&] { return r.app().gateway()->inflight(engine.name()) == 0; }, kGenerous));
}

TEST(GrpcApi, CancellingBeforeTheFirstTokenClosesTheEnginesRequest) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  engine.stall_ms = 60'000;  // nothing comes back to write, so only the cancel can end the call
  Router r(engine);
  auto stub = v1::Router::NewStub(r.channel());
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, chat("slow"));
  ASSERT_TRUE(cgn::testing::wait_until([&] { return engine.generations.load() == 1; }, kGenerous));
  const auto t0 = std::chrono::steady_clock::now();
  ctx.TryCancel();
  v1::GenerateResponse msg;
  EXPECT_FALSE(reader->Read(&msg));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(cgn::testing::wait_until([&] { return engine.cancelled.load() == 1; }, kGenerous));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, kGenerous);
  EXPECT_TRUE(
      cgn::testing::wait_until([&] { return r.app().gateway()->inflight(engine.name()) == 0; }, kGenerous));
}

TEST(GrpcApi, KeysAreCheckedFromTheAuthorizationMetadata) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  Router r(engine, {.keys = true});
  auto ch = r.channel();
  EXPECT_EQ(generate(*ch, chat("x")).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(generate(*ch, chat("x"), "sk-wrong-0123456789abcdef").status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(engine.generations.load(), 0);
  Call ok = generate(*ch, chat("x"), kKey);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(r.metric(R"(cgn_router_grpc_requests_total{method="Generate",code="UNAUTHENTICATED"})"), 2.0);
}

TEST(GrpcApi, AdmissionRefusalIsResourceExhaustedAndBadRequestsMapToTheirCodes) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  engine.tokens = 100000;
  engine.token_delay_ms = 5;
  Router r(engine, {.max_queue = 1});
  auto stub = v1::Router::NewStub(r.channel());
  grpc::ClientContext holder;
  auto reader = stub->Generate(&holder, chat("hold"));
  v1::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));  // the one slot is taken
  auto ch = r.channel();
  Call refused = generate(*ch, chat("more"));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  // HTTP's Retry-After of the 429 comes as trailing metadata.
  EXPECT_GE(std::atoi(refused.retry_after.c_str()), 1) << "retry-after: \"" << refused.retry_after << "\"";
  EXPECT_EQ(r.metric(R"(cgn_router_admission_rejections_total{model="test-model",reason="queue_full"})"),
            1.0);
  holder.TryCancel();
  while (reader->Read(&msg)) {
  }
  (void)reader->Finish();

  engine.tokens = 2;
  EXPECT_EQ(generate(*ch, chat("x", "no-such-model")).status.error_code(), grpc::StatusCode::NOT_FOUND);
  v1::GenerateRequest empty;
  empty.set_model("test-model");
  EXPECT_EQ(generate(*ch, empty).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto bad_priority = chat("x");
  bad_priority.set_priority("urgent");
  Call bp = generate(*ch, bad_priority);
  EXPECT_EQ(bp.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bp.status.error_message().find("X-CGN-Priority"), std::string::npos) << bp.status.error_message();
}

TEST(GrpcApi, DeadlinesAreDeadlineExceeded) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  Router r(engine);
  auto ch = r.channel();
  // A deadline the router's TTFT estimate cannot meet: HTTP's 429 deadline_exceeded.
  engine.queue_depth = 20;  // 20 x 50 ms queue wait, once a poll has seen it
  auto tight = chat("x");
  tight.set_deadline_ms(100);
  EXPECT_TRUE(cgn::testing::wait_until(
      [&] { return generate(*ch, tight).status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED; },
      kGenerous, 50ms));
  // The call's own gRPC deadline passing while the engine stalls: the engine's request is closed.
  engine.queue_depth = 0;
  EXPECT_TRUE(cgn::testing::wait_until([&] { return generate(*ch, tight).status.ok(); }, kGenerous, 50ms));
  engine.stall_ms = 60'000;
  const int before = engine.cancelled.load();
  EXPECT_EQ(generate(*ch, chat("slow"), "", 300ms).status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(cgn::testing::wait_until([&] { return engine.cancelled.load() == before + 1; }, kGenerous));
}

TEST(GrpcApi, AnEngineThatFailsIsFailedOverOrUnavailable) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  Router r(engine);
  auto ch = r.channel();
  engine.fail_next = 100;
  engine.fail_status = 503;
  Call c = generate(*ch, chat("x"));
  EXPECT_EQ(c.status.error_code(), grpc::StatusCode::UNAVAILABLE) << c.status.error_message();
}

std::shared_ptr<grpc::ChannelCredentials> tls_creds(const std::string& ca,
                                                    const cgn::testing::CertFiles* client) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = cgn::testing::read_file(ca);
  if (client != nullptr) {
    o.pem_cert_chain = cgn::testing::read_file(client->cert);
    o.pem_private_key = cgn::testing::read_file(client->key);
  }
  return grpc::SslCredentials(o);
}

TEST(GrpcApi, MutualTlsAcceptsOnlyClientsTheConfiguredCaSigned) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  cgn::testing::TempDir dir;
  cgn::testing::TestCa ca(dir.path(), "ca");
  cgn::testing::TestCa other(dir.path(), "other");
  const auto server = ca.issue("server");
  const auto good = ca.issue("client");
  const auto stranger = other.issue("stranger");
  Router r(engine, {.tls_cert = server.cert, .tls_key = server.key, .tls_client_ca = ca.ca_file()});
  ASSERT_NE(r.app().grpc_port(), 0);

  auto ok = generate(*r.channel(tls_creds(ca.ca_file(), &good)), chat("x"));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_FALSE(ok.text().empty());
  EXPECT_EQ(generate(*r.channel(tls_creds(ca.ca_file(), nullptr)), chat("x"), "", 5s).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(generate(*r.channel(tls_creds(ca.ca_file(), &stranger)), chat("x"), "", 5s).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(generate(*r.channel(), chat("x"), "", 5s).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(engine.generations.load(), 1);
}

TEST(GrpcApi, AnUnreadableCertificateOrABusyPortStopsTheStartNamingTheCause) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  cgn::testing::TempDir dir;
  RouterApp missing(
      grpc_setup(engine, {.tls_cert = dir.file("none.pem"), .tls_key = dir.file("none-key.pem")}, dir));
  auto st = missing.start();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, 2);
  EXPECT_NE(st.error().message.find("[router.grpc] tls_cert"), std::string::npos) << st.error().message;
  EXPECT_EQ(missing.gateway(), nullptr);

  RouterSetup busy = grpc_setup(engine, {}, dir);
  busy.config.router.grpc.listen = "127.0.0.1:" + std::to_string(engine.port());  // the engine holds it
  RouterApp taken(std::move(busy));
  st = taken.start();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, 1);
  EXPECT_NE(st.error().message.find("[router.grpc] listen"), std::string::npos) << st.error().message;
}

// One grpc.health.v1 Check per call of the returned function (service ""); UNKNOWN when the
// call itself fails.
std::function<grpc::health::v1::HealthCheckResponse::ServingStatus()> health_checker(
    const std::shared_ptr<grpc::Channel>& channel) {
  std::shared_ptr<grpc::health::v1::Health::Stub> health = grpc::health::v1::Health::NewStub(channel);
  return [health] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse res;
    auto st = health->Check(&ctx, req, &res);
    return st.ok() ? res.status() : grpc::health::v1::HealthCheckResponse::UNKNOWN;
  };
}

TEST(GrpcApi, HealthIsServingWhileANodeIsHealthy) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  Router r(engine);
  const auto status = health_checker(r.channel());
  EXPECT_TRUE(cgn::testing::wait_until(
      [&] { return status() == grpc::health::v1::HealthCheckResponse::SERVING; }, kGenerous, 50ms));
  engine.healthy = false;
  EXPECT_TRUE(cgn::testing::wait_until(
      [&] { return status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING; }, kGenerous, 50ms));
  engine.healthy = true;
  EXPECT_TRUE(cgn::testing::wait_until(
      [&] { return status() == grpc::health::v1::HealthCheckResponse::SERVING; }, kGenerous, 50ms));
}

TEST(GrpcApi, HealthIsReReadAtOnceWhenToldItChangedNotAnIntervalLater) {
  http::RouteTable routes;
  http::Server http_server(http::ServerConfig{}, http::RouteTable{});
  std::atomic<bool> up{false};
  grpc_api::GrpcApiOptions o;
  o.listen = "127.0.0.1:0";
  o.routes = &routes;
  o.http_server = &http_server;
  o.serving = [&] { return up.load(); };
  o.health_interval = std::chrono::hours(1);  // only health_changed() can move it in this test
  grpc_api::GrpcApi api(std::move(o));
  auto port = api.start();
  ASSERT_TRUE(port) << port.error().message;
  const auto status = health_checker(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(*port), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  up = true;
  api.health_changed();
  EXPECT_TRUE(cgn::testing::wait_until(
      [&] { return status() == grpc::health::v1::HealthCheckResponse::SERVING; }, kGenerous, 5ms));
  up = false;
  api.health_changed();
  EXPECT_TRUE(cgn::testing::wait_until(
      [&] { return status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING; }, kGenerous, 5ms));
  api.stop(0ms);
}

TEST(GrpcApi, RefusalsAndTheEnginesForwardedForNameTheGrpcPeer) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  cgn::testing::TempDir dir;
  const std::string log_file = dir.file("router.log");
  {
    // The HTTP listener is on 127.0.0.1, the gRPC client comes over ::1: the refusal's log line
    // and the engine's X-Forwarded-For must name ::1.
    Router r(engine, {.keys = true, .grpc_listen = "[::1]:0", .log_file = log_file});
    ASSERT_NE(r.app().grpc_port(), 0);
    auto ch = r.channel();
    EXPECT_EQ(generate(*ch, chat("x")).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    Call ok = generate(*ch, chat("x"), kKey);
    ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
    ASSERT_EQ(engine.seen().size(), 1u);
    EXPECT_EQ(engine.seen()[0].header("X-Forwarded-For"), "::1");
  }
  log::set_stderr_sink();
  const std::string text = cgn::testing::read_file(log_file);
  EXPECT_NE(text.find("request refused reason=auth client=::1"), std::string::npos) << text;
  EXPECT_EQ(text.find("client=127.0.0.1"), std::string::npos) << text;
}

TEST(GrpcApi, ACancelledCallGivesItsAdmissionSlotBack) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  engine.stall_ms = 60'000;
  Router r(engine, {.max_queue = 1});
  auto stub = v1::Router::NewStub(r.channel());
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, chat("hold"));
  ASSERT_TRUE(cgn::testing::wait_until([&] { return engine.generations.load() == 1; }, kGenerous));
  auto ch = r.channel();
  EXPECT_EQ(generate(*ch, chat("more")).status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  ctx.TryCancel();
  v1::GenerateResponse msg;
  EXPECT_FALSE(reader->Read(&msg));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The slot is free again: the next call is admitted (and answered once the stall is off).
  engine.stall_ms = 0;
  EXPECT_TRUE(
      cgn::testing::wait_until([&] { return generate(*ch, chat("next")).status.ok(); }, kGenerous, 50ms));
  EXPECT_TRUE(
      cgn::testing::wait_until([&] { return r.app().gateway()->inflight(engine.name()) == 0; }, kGenerous));
}

TEST(GrpcApi, StoppingTheRouterDuringAStreamEndsTheCallAndTheEnginesRequest) {
  EndlessStream s;
  testing::FakeEngine& engine = s.engine;
  auto& reader = s.reader;
  v1::GenerateResponse& msg = s.msg;
  Router& r = *s.r;
  ASSERT_TRUE(s.first);
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] { r.app().stop(SteadyClock::instance().now() + 200 * kNanosPerMilli); });
  while (reader->Read(&msg)) {
  }
  const grpc::Status st = reader->Finish();
  stopper.join();
  EXPECT_TRUE(st.error_code() == grpc::StatusCode::UNAVAILABLE ||
              st.error_code() == grpc::StatusCode::CANCELLED)
      << grpc_api::code_name(st.error_code()) << ": " << st.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, kGenerous);
  EXPECT_TRUE(cgn::testing::wait_until([&] { return engine.cancelled.load() == 1; }, kGenerous));
  EXPECT_EQ(engine.completed.load(), 0);
}

TEST(GrpcApi, ARequestWhoseJsonIsOverMaxBodyBytesIsInvalidArgumentAsHttpsIs413) {
  testing::FakeEngine engine("e");
  ASSERT_NE(engine.start(), 0);
  Router r(engine, {.max_body_bytes = 2000});
  auto ch = r.channel();
  // The message fits gRPC's limit (max_body_bytes); its JSON, with the quoting of each '"', does
  // not: the HTTP path's body check (request intake) refuses it, as it does an HTTP request.
  Call c = generate(*ch, chat(std::string(1800, '"')));
  EXPECT_EQ(c.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.status.error_message();
  EXPECT_NE(c.status.error_message().find("2000 bytes"), std::string::npos) << c.status.error_message();
  EXPECT_EQ(engine.generations.load(), 0);
  EXPECT_TRUE(generate(*ch, chat("small")).status.ok());
}

}  // namespace
}  // namespace cgn::router
