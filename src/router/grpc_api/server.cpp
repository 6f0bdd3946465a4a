#include "router/grpc_api/server.h"

#include <fmt/format.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cognitora/v1/router.grpc.pb.h"
#include "core/http/sse.h"
#include "core/log.h"
#include "core/tls/grpc_tls.h"
#include "router/grpc_api/local_exchange.h"
#include "router/grpc_api/translate.h"

namespace cgn::router::grpc_api {

namespace v1 = cognitora::v1;

namespace {

log::Logger& grpc_log() {
  static log::Logger l = log::get("router");
  return l;
}

// How often a call's thread looks at whether its client cancelled or the API is stopping while
// it waits for the handler's next piece.
constexpr std::chrono::milliseconds kCancelPoll{10};
// After stop() cancels them, how long the handlers of in-process requests get to return.
constexpr std::chrono::seconds kHandlerExit{5};

// What is left of the call's gRPC deadline in ms: 0 for none, -1 when it has passed.
int64_t grpc_deadline_ms(const grpc::ServerContext& ctx) {
  const auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return 0;
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::system_clock::now())
          .count();
  return left > 0 ? left : -1;
}

std::string metadata(const grpc::ServerContext& ctx, std::string_view key) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

std::string field(const http::Fields& f, std::string_view name) {
  auto it = f.find(name);
  return it == f.end() ? std::string() : std::string(it->value());
}

const grpc::Status kCancelled(grpc::StatusCode::CANCELLED, "the client cancelled the call");

// The handler's answer (Pieces, in order) as GenerateResponse messages and the call's status;
// translate.h does the translating. On the call's thread.
class Answer {
 public:
  Answer(grpc::ServerContext& ctx, grpc::ServerWriter<v1::GenerateResponse>& writer, bool buffered)
      : ctx_(ctx), writer_(writer), buffered_(buffered) {}

  // The call's status once `p` decides it; nullopt: more to come.
  std::optional<grpc::Status> take(Piece& p) {
    switch (p.kind) {
      case Piece::Kind::kHead:
        status_ = p.status;
        node_ = field(p.headers, "X-CGN-Node");
        request_id_ = field(p.headers, "X-Request-Id");
        if (auto retry = field(p.headers, "Retry-After"); !retry.empty()) {
          ctx_.AddTrailingMetadata("retry-after", retry);
        }
        return std::nullopt;
      case Piece::Kind::kBytes:
        if (status_ != 200 || buffered_) {
          body_ += p.bytes;
          return std::nullopt;
        }
        return events(p.bytes);
      case Piece::Kind::kEnd:
        if (status_ != 200) {
          return status_for_http(status_, body_);
        }
        if (buffered_) {
          auto msg = from_body(body_);
          if (!msg) {
            return grpc::Status(msg.error().code, msg.error().message);
          }
          return send(*msg, true) ? grpc::Status::OK : kCancelled;
        }
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended before it was complete");
      case Piece::Kind::kAbort:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream broke off");
      case Piece::Kind::kDone:
        break;
    }
    return grpc::Status(grpc::StatusCode::INTERNAL, "the router's handler ended without an answer");
  }

 private:
  // The events in `bytes`. The last message before "[DONE]" goes with the call's status in one
  // write (WriteLast); every other message goes at once, so no delta waits for the next.
  std::optional<grpc::Status> events(std::string_view bytes) {
    if (auto st = sse_.feed(bytes); !st) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "the router's event stream: " + st.error().message);
    }
    std::optional<v1::GenerateResponse> held;
    http::SseEvent ev;
    while (sse_.pop(ev)) {
      if (ev.is_done()) {
        return !held || send(*held, true) ? grpc::Status::OK : kCancelled;
      }
      auto msg = from_chunk(ev.data);
      if (!msg) {
        return grpc::Status(msg.error().code, msg.error().message);
      }
      if (!*msg) {
        continue;
      }
      if (held && !send(*held, false)) {
        return kCancelled;
      }
      held = std::move(**msg);
    }
    if (held && !send(*held, false)) {
      return kCancelled;
    }
    return std::nullopt;
  }

  bool send(v1::GenerateResponse& msg, bool last) {
    if (first_) {
      msg.set_node(node_);
      msg.set_request_id(request_id_);
      first_ = false;
    }
    return last ? writer_.Write(msg, grpc::WriteOptions().set_last_message()) : writer_.Write(msg);
  }

  grpc::ServerContext& ctx_;
  grpc::ServerWriter<v1::GenerateResponse>& writer_;
  const bool buffered_;
  unsigned status_ = 0;
  std::string node_;
  std::string request_id_;
  std::string body_;  // a buffered or an error answer
  http::SseParser sse_;
  bool first_ = true;
};

}  // namespace

class RouterService final : public v1::Router::Service {
 public:
  RouterService(const GrpcApiOptions& o, metrics::CounterFamily* requests) : o_(o), requests_(requests) {}

  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    grpc::Status st = generate(*ctx, *req, *writer);
    if (requests_ != nullptr) {
      requests_->with({"Generate", std::string(code_name(st.error_code()))}).inc();
    }
    return st;
  }

  // stop(): new calls are refused and the running handlers see draining(); waits up to `grace`
  // for the running calls, then ends the rest (UNAVAILABLE, their handlers cancelled).
  void stop(std::chrono::milliseconds grace) {
    std::unique_lock lock(mu_);
    stopping_ = true;
    for (auto& ex : exchanges_) {
      ex->drain();
    }
    if (!cv_.wait_for(lock, grace, [this] { return calls_ == 0; })) {
      aborting_ = true;
      cv_.wait_for(lock, kHandlerExit, [this] { return calls_ == 0; });
    }
  }

  // Waits (bounded) until every handler started has returned, so none outlives the Gateway.
  void wait_handlers() {
    const auto until = std::chrono::steady_clock::now() + kHandlerExit;
    std::unique_lock lock(mu_);
    for (auto& ex : exchanges_) {
      ex->cancel();
    }
    while (!exchanges_.empty() && std::chrono::steady_clock::now() < until) {
      std::erase_if(exchanges_, [](const auto& ex) { return ex->done(); });
      lock.unlock();
      std::this_thread::sleep_for(kCancelPoll);
      lock.lock();
    }
    if (!exchanges_.empty()) {
      CGN_LOG_WARN(grpc_log(), "in-process requests still running after the gRPC API stopped",
                   log::kv("count", exchanges_.size()));
    }
  }

 private:
  grpc::Status generate(grpc::ServerContext& ctx, const v1::GenerateRequest& req,
                        grpc::ServerWriter<v1::GenerateResponse>& writer) {
    const int64_t left = grpc_deadline_ms(ctx);
    if (left < 0) {
      return {grpc::StatusCode::DEADLINE_EXCEEDED, "the call's deadline passed before it was dispatched"};
    }
    auto call = to_http(req, left);
    if (!call) {
      return {grpc::StatusCode::INVALID_ARGUMENT, call.error().message};
    }
    http::Request hreq{http::Verb::post, call->path, 11};
    hreq.set(http::Field::content_type, "application/json");
    if (auto auth = metadata(ctx, "authorization"); !auth.empty()) {
      hreq.set(http::Field::authorization, auth);
    }
    if (auto id = metadata(ctx, "x-request-id"); !id.empty()) {
      hreq.set("X-Request-Id", id);
    }
    for (const auto& [k, v] : call->headers) {
      hreq.set(k, v);
    }
    hreq.body() = std::move(call->body);
    hreq.prepare_payload();
    const std::string remote = remote_of_peer(ctx.peer());
    // The API listener's header check (API keys, refusals logged with the client's address).
    if (o_.check_head) {
      if (std::optional<http::Response> refusal = o_.check_head(hreq, remote)) {
        if (auto retry = field(refusal->base(), "Retry-After"); !retry.empty()) {
          ctx.AddTrailingMetadata("retry-after", retry);
        }
        return status_for_http(refusal->result_int(), refusal->body());
      }
    }
    const http::RouteTable::Match match = o_.routes->find(http::Verb::post, call->path);
    if (match.handler == nullptr) {
      return {grpc::StatusCode::INTERNAL, "the router has no route for " + call->path};
    }
    std::shared_ptr<LocalExchange> ex;
    {
      std::lock_guard lock(mu_);
      if (stopping_) {
        return {grpc::StatusCode::UNAVAILABLE, "the router is shutting down"};
      }
      const size_t i = next_worker_++ % o_.http_server->worker_count();
      ex = std::make_shared<LocalExchange>(o_.http_server->worker_context(i), i, std::move(hreq), remote);
      std::erase_if(exchanges_, [](const auto& e) { return e->done(); });
      exchanges_.push_back(ex);
      ++calls_;
    }
    ex->start(*match.handler);
    grpc::Status st = relay(ctx, req.buffered(), writer, *ex);
    {
      std::lock_guard lock(mu_);
      --calls_;
    }
    cv_.notify_all();
    return st;
  }

  // Takes the handler's pieces until they decide the call's status, the client cancels or the
  // API stops; in the last two the handler is cancelled as for a departed HTTP client.
  grpc::Status relay(grpc::ServerContext& ctx, bool buffered,
                     grpc::ServerWriter<v1::GenerateResponse>& writer, LocalExchange& ex) {
    Answer answer(ctx, writer, buffered);
    for (;;) {
      std::optional<Piece> p = ex.next(kCancelPoll);
      if (!p || aborting_) {
        if (aborting_) {
          ex.cancel();
          return {grpc::StatusCode::UNAVAILABLE, "the router is shutting down"};
        }
        if (ctx.IsCancelled()) {
          ex.cancel();
          return kCancelled;
        }
        continue;
      }
      if (std::optional<grpc::Status> st = answer.take(*p)) {
        if (!st->ok()) {
          ex.cancel();  // a no-op once the handler has returned
        }
        return *st;
      }
    }
  }

  const GrpcApiOptions& o_;
  metrics::CounterFamily* requests_;
  std::mutex mu_;
  std::condition_variable cv_;  // calls_ dropped
  size_t next_worker_ = 0;
  size_t calls_ = 0;  // Generate calls with a handler started and not yet returned
  bool stopping_ = false;
  std::atomic<bool> aborting_{false};                      // stop()'s grace is over: end the running calls
  std::vector<std::shared_ptr<LocalExchange>> exchanges_;  // started, not yet seen done
};

GrpcApi::GrpcApi(GrpcApiOptions options) : options_(std::move(options)) {}

GrpcApi::~GrpcApi() {
  stop(std::chrono::milliseconds(0));
}

Result<uint16_t, GrpcApiError> GrpcApi::start() {
  auto creds =
      tls::server_credentials(options_.tls_cert, options_.tls_key, options_.tls_client_ca, "[router.grpc]");
  if (!creds) {
    return make_error(GrpcApiError::kConfig, creds.error().message);
  }
  if (options_.routes == nullptr || options_.http_server == nullptr) {
    return make_error(GrpcApiError::kStart, "[router.grpc] needs the router's HTTP routes and server");
  }
  service_ = std::make_unique<RouterService>(options_, options_.requests);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.listen, *creds, &port);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(options_.max_message_bytes, std::numeric_limits<int>::max())));
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a second router on the port fails to start
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    server_.reset();
    return make_error(GrpcApiError::kStart,
                      fmt::format("[router.grpc] listen: cannot listen on \"{}\"", options_.listen));
  }
  const bool serving = !options_.serving || options_.serving();
  auto* health = server_->GetHealthCheckService();
  health->SetServingStatus("", serving);
  health->SetServingStatus(v1::Router::service_full_name(), serving);
  health_thread_ = std::thread([this, serving] { health_loop(serving); });
  CGN_LOG_INFO(grpc_log(), "gRPC API listening", log::kv("address", options_.listen), log::kv("port", port),
               log::kv("tls", !options_.tls_cert.empty()), log::kv("mtls", !options_.tls_client_ca.empty()));
  return static_cast<uint16_t>(port);
}

void GrpcApi::health_loop(bool last) {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait_for(lock, options_.health_interval, [this] { return stopping_ || health_changed_; });
    if (stopping_) {
      return;
    }
    health_changed_ = false;
    const bool now = !options_.serving || options_.serving();
    if (now != last) {
      server_->GetHealthCheckService()->SetServingStatus(now);
      last = now;
    }
  }
}

void GrpcApi::health_changed() {
  {
    std::lock_guard lock(mu_);
    health_changed_ = true;
  }
  cv_.notify_all();
}

void GrpcApi::stop(std::chrono::milliseconds grace) {
  if (!server_) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (health_thread_.joinable()) {
    health_thread_.join();
  }
  // NOT_SERVING from here on, for every service.
  server_->GetHealthCheckService()->Shutdown();
  service_->stop(grace);
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
  service_->wait_handlers();
}

}  // namespace cgn::router::grpc_api
