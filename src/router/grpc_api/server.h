// GrpcApi: cgn-router's gRPC listener ([router.grpc], docs/grpc-api.md). It serves
// cognitora.v1.Router/Generate and the standard grpc.health.v1 service.
//
// A Generate call is run as the equivalent OpenAI HTTP request (translate.h) through the
// router's own HTTP pipeline, in process: the API listener's header check (the API keys: the
// call's `authorization` metadata goes as the Authorization header; refusals are logged with the
// gRPC peer's address), then the route's handler on one of the HTTP server's worker threads
// (round robin) over a LocalExchange (local_exchange.h). So a call takes exactly the HTTP path:
// admission per model and role, priority, deadline, the carbon gate, routing, failover, P/D and
// the request metrics. The answer comes back as GenerateResponse messages; an HTTP error as the
// mapped gRPC status, with a Retry-After as `retry-after` trailing metadata. When the client
// cancels, the handler sees its client gone, so the router closes the engine's request.
//
// Health: SERVING while `serving()` is true (the router has a healthy node), NOT_SERVING
// otherwise and once stop() begins; re-read at once when health_changed() is called (RouterApp
// calls it on every change of the gateway's healthy nodes), and every health_interval besides.
//
// Threads: grpc++'s synchronous server runs each call on one of its threads, which waits for the
// handler's answer (a bounded queue: LocalExchange::kMaxPendingBytes) and writes it to the
// client. One health thread. start()/stop() are for the owning thread. The HTTP server and its
// routes must outlive stop(): stop the GrpcApi before the Gateway (RouterApp does).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/http/server.h"
#include "core/metrics.h"
#include "core/result.h"

namespace grpc {
class Server;
}

namespace cgn::router::grpc_api {

class RouterService;

enum class GrpcApiError : uint8_t { kConfig, kStart };

struct GrpcApiOptions {
  std::string listen;  // HOST:PORT; port 0 picks one
  // TLS (PEM paths): cert and key both or neither; with tls_client_ca, clients must present a
  // certificate it verifies (mutual TLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // The router's HTTP pipeline, which calls run through: the API listener's header check
  // (optional), its routes and its server (the worker threads). Required; they outlive stop().
  http::HeaderCheck check_head;
  const http::RouteTable* routes = nullptr;
  http::Server* http_server = nullptr;
  size_t max_message_bytes = size_t{8} << 20;
  std::function<bool()> serving;  // health; unset: always serving
  std::chrono::milliseconds health_interval{5000};
  // cgn_router_grpc_requests_total{method,code}: counts every call when set.
  metrics::CounterFamily* requests = nullptr;
};

class GrpcApi {
 public:
  explicit GrpcApi(GrpcApiOptions options);
  ~GrpcApi();  // stop(0)
  GrpcApi(const GrpcApi&) = delete;
  GrpcApi& operator=(const GrpcApi&) = delete;

  // Reads the TLS files (kConfig names the key and the file), binds and starts serving. Returns
  // the bound port (kStart when the address cannot be bound).
  Result<uint16_t, GrpcApiError> start();
  // Health turns NOT_SERVING, new calls are refused (UNAVAILABLE), in-flight calls may finish
  // for `grace` (their handlers see draining()), then the rest end UNAVAILABLE and their handlers
  // are cancelled; returns once every handler has returned (bounded). Idempotent.
  void stop(std::chrono::milliseconds grace);
  // serving() may have changed: the health thread re-reads it now. Quick; any thread.
  void health_changed();

 private:
  // Sets the health status whenever serving() differs from `last`, the status start() set.
  void health_loop(bool last);

  GrpcApiOptions options_;
  std::unique_ptr<RouterService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool health_changed_ = false;
  std::thread health_thread_;
};

}  // namespace cgn::router::grpc_api
