#include "core/tls/grpc_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "core/tls/grpc_tls.h"

namespace cgn::tls {

Result<GrpcListener, GrpcServerError> start_grpc_server(
    std::string_view what, const std::string& listen, const config::TlsConfig& tls,
    const std::function<void(grpc::ServerBuilder&)>& configure) {
  auto creds = server_credentials(tls);
  if (!creds) {
    return make_error(GrpcServerError::kTls, fmt::format("{}: {}", what, creds.error().message));
  }
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(listen, *creds, &port);
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a port in use is an error, not shared
  configure(b);
  GrpcListener l;
  l.server = b.BuildAndStart();
  if (!l.server || port <= 0 || port > 65535) {
    if (l.server) {
      l.server->Shutdown();
      l.server->Wait();
    }
    return make_error(GrpcServerError::kListen, fmt::format("{}: cannot listen on {}", what, listen));
  }
  l.port = static_cast<uint16_t>(port);
  return l;
}

}  // namespace cgn::tls
