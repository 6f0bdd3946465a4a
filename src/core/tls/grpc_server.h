// Starting a gRPC server on one address with [tls]'s credentials (grpc_tls.h), the way every
// daemon's service does (cgn-power's Power, cgn-kvcached's KvCache): a port in use is an error,
// not shared (no SO_REUSEPORT); port 0 binds any free port and the bound one is returned.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/config.h"
#include "core/result.h"

namespace grpc {
class Server;
class ServerBuilder;
}  // namespace grpc

namespace cgn::tls {

struct GrpcListener {
  std::unique_ptr<grpc::Server> server;
  uint16_t port = 0;
};

enum class GrpcServerError : uint8_t {
  kTls,     // the credentials cannot be built (a PEM file is missing); the message names the key
  kListen,  // the address cannot be bound
};

// `configure` registers the services (which must outlive the server) and sets any builder
// option. Error messages start with `what` ("Power gRPC: cannot listen on 127.0.0.1:1"); nothing
// is left running on error.
Result<GrpcListener, GrpcServerError> start_grpc_server(
    std::string_view what, const std::string& listen, const config::TlsConfig& tls,
    const std::function<void(grpc::ServerBuilder&)>& configure);

}  // namespace cgn::tls
