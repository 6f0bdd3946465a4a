#include "core/tls/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>

#include "etcd/rpc.grpc.pb.h"  // a real service to register (its methods answer UNIMPLEMENTED)

namespace cgn::tls {
namespace {

etcdserverpb::KV::Service kv_service;

void with_service(grpc::ServerBuilder& b) {
  b.RegisterService(&kv_service);
}

TEST(StartGrpcServer, BindsAnyFreePortAndRefusesOneInUse) {
  auto first = start_grpc_server("Test gRPC", "127.0.0.1:0", config::TlsConfig{}, with_service);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_GT(first->port, 0);
  const std::string taken = "127.0.0.1:" + std::to_string(first->port);
  auto second = start_grpc_server("Test gRPC", taken, config::TlsConfig{}, with_service);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, GrpcServerError::kListen);
  EXPECT_EQ(second.error().message, "Test gRPC: cannot listen on " + taken);
  first->server->Shutdown();
  first->server->Wait();
}

TEST(StartGrpcServer, ConfiguresTheBuilderBeforeItStarts) {
  bool configured = false;
  auto s = start_grpc_server("Test gRPC", "127.0.0.1:0", config::TlsConfig{}, [&](grpc::ServerBuilder& b) {
    with_service(b);
    configured = true;
  });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(configured);
  s->server->Shutdown();
  s->server->Wait();
}

TEST(StartGrpcServer, AMissingCertificateIsATlsErrorNamingTheKey) {
  config::TlsConfig tls;
  tls.ca_file = "/no/such/ca.pem";
  tls.cert_file = "/no/such/cert.pem";
  tls.key_file = "/no/such/key.pem";
  auto s = start_grpc_server("Test gRPC", "127.0.0.1:0", tls, with_service);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, GrpcServerError::kTls);
  EXPECT_EQ(s.error().message.rfind("Test gRPC: ", 0), 0u) << s.error().message;
  EXPECT_NE(s.error().message.find("[tls]"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("/no/such/"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace cgn::tls
