#include "agent/agent_grpc.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <cmath>

#include "cognitora/v1/agent.grpc.pb.h"
#include "core/log.h"
#include "core/tls/grpc_tls.h"

namespace cgn::agent {

namespace pb = cognitora::v1;

std::string_view to_string(GrpcError e) {
  switch (e) {
    case GrpcError::kListen:
      return "listen";
    case GrpcError::kCall:
      return "call";
    case GrpcError::kAnswer:
      return "answer";
  }
  return "unknown";
}

// --- server ----------------------------------------------------------------------------------

class AgentGrpcServer::Service final : public pb::Agent::Service {
 public:
  Service(AgentHealthSource source, auth::ClusterToken token)
      : source_(std::move(source)), token_(std::move(token)), log_(log::get("agent.grpc")) {}

  grpc::Status Health(grpc::ServerContext* ctx, const pb::HealthRequest* /*req*/,
                      pb::HealthResponse* resp) override {
    if (auto st = admit(*ctx); !st.ok()) {
      return st;
    }
    to_proto(source_(), resp);
    return grpc::Status::OK;
  }

 private:
  // The cluster token, unless a verified client certificate stands in for it.
  grpc::Status admit(const grpc::ServerContext& ctx) {
    if (!token_.configured() || tls::peer_verified(ctx)) {
      return grpc::Status::OK;
    }
    const auto& md = ctx.client_metadata();
    auto it = md.find(auth::kClusterTokenMetadata);
    const bool present = it != md.end();
    if (present && token_.accepts(std::string_view(it->second.data(), it->second.size()))) {
      return grpc::Status::OK;
    }
    const std::string why = present ? "wrong cluster token" : "no cluster token";
    CGN_LOG_WARN(log_, "Agent call refused", log::kv("peer", ctx.peer()), log::kv("reason", why));
    return {grpc::StatusCode::UNAUTHENTICATED,
            why + " (the Agent service answers only the cluster; [cluster] token_file / token_env)"};
  }

  AgentHealthSource source_;
  auth::ClusterToken token_;
  log::Logger log_;
};

Result<std::unique_ptr<AgentGrpcServer>, GrpcError> AgentGrpcServer::start(const std::string& listen,
                                                                           AgentHealthSource source,
                                                                           cluster::GrpcSecurity security) {
  auto creds = tls::server_credentials(security.tls);
  if (!creds) {
    return make_error(GrpcError::kListen, fmt::format("agent gRPC: {}", creds.error().message));
  }
  std::unique_ptr<AgentGrpcServer> s(new AgentGrpcServer());
  s->service_ = std::make_unique<Service>(std::move(source), std::move(security.token));
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(listen, *creds, &port);
  b.RegisterService(s->service_.get());
  b.SetMaxReceiveMessageSize(64 * 1024);  // requests are empty
  s->server_ = b.BuildAndStart();
  if (!s->server_ || port <= 0 || port > 65535) {
    if (s->server_) {
      s->server_->Shutdown();
      s->server_->Wait();
    }
    return make_error(GrpcError::kListen, fmt::format("agent gRPC: cannot listen on {}", listen));
  }
  s->port_ = static_cast<uint16_t>(port);
  return s;
}

AgentGrpcServer::~AgentGrpcServer() {
  stop();
}

void AgentGrpcServer::stop(std::chrono::milliseconds grace) {
  if (!server_) {
    return;
  }
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
}

// --- client ----------------------------------------------------------------------------------

Result<cluster::AgentHealth, GrpcError> call_agent_health(const std::string& target,
                                                          std::chrono::milliseconds timeout,
                                                          const cluster::GrpcSecurity& security) {
  auto creds = tls::channel_credentials(security.tls);
  if (!creds) {
    return make_error(GrpcError::kCall, fmt::format("Agent.Health on {}: {}", target, creds.error().message));
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(cluster::kMaxHealthResponseBytes);
  auto channel = grpc::CreateCustomChannel(target, *creds, args);
  auto stub = pb::Agent::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  if (security.token.configured()) {
    ctx.AddMetadata(auth::kClusterTokenMetadata, std::string(security.token.presented()));
  }
  pb::HealthRequest req;
  pb::HealthResponse resp;
  grpc::Status st = stub->Health(&ctx, req, &resp);
  if (!st.ok()) {
    return make_error(GrpcError::kCall, fmt::format("Agent.Health on {}: {} ({})", target, st.error_message(),
                                                    static_cast<int>(st.error_code())));
  }
  auto h = cluster::from_proto(resp);
  if (!h) {
    return make_error(GrpcError::kAnswer, fmt::format("Agent.Health on {}: {}", target, h.error().message));
  }
  return std::move(*h);
}

}  // namespace cgn::agent
