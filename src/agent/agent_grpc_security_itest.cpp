// Who may call the Agent service, over real loopback gRPC: the cluster token (a probe's plaintext
// Agent.Health without it is refused), and mutual TLS from [tls] with certificates made here
// (testing/test_certs.h): a good pair connects; a wrong CA, an expired certificate, a missing
// client certificate and a plaintext client are refused, the error naming the agent called.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "agent/agent_grpc.h"
#include "cognitora/v1/agent.grpc.pb.h"
#include "testing/process.h"
#include "testing/test_certs.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::testing::CertFiles;
using cgn::testing::TempDir;
using cgn::testing::TestCa;

const std::string kToken = "agent-cluster-token-0123456789";
const std::string kOldToken = "agent-cluster-token-previous-01";

cluster::AgentHealth sample_health() {
  cluster::NodeRecord r;
  r.node_id = "n1";
  r.address = "127.0.0.1:9090";
  r.engine = "vllm";
  r.models = {"m"};
  return cluster::AgentHealth{r, cluster::EngineState::kReady, 1};
}

struct Served {
  std::unique_ptr<AgentGrpcServer> server;
  std::string target;
};

Served serve(cluster::GrpcSecurity security) {
  auto s = AgentGrpcServer::start("127.0.0.1:0", sample_health, std::move(security));
  EXPECT_TRUE(s.ok()) << s.error().message;
  if (!s.ok()) {
    return {};
  }
  const std::string target = "127.0.0.1:" + std::to_string((*s)->port());
  return {std::move(*s), target};
}

config::TlsConfig tls_of(const TestCa& ca, const CertFiles& cert) {
  config::TlsConfig t;
  t.ca_file = ca.ca_file();
  t.cert_file = cert.cert;
  t.key_file = cert.key;
  return t;
}

void expect_refused(const Result<cluster::AgentHealth, GrpcError>& r, const std::string& target,
                    std::string_view why = {}) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, GrpcError::kCall);
  EXPECT_NE(r.error().message.find(target), std::string::npos) << r.error().message;
  if (!why.empty()) {
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
  }
}

TEST(AgentGrpcSecurity, health_answers_only_callers_with_a_cluster_token) {
  auto s = serve(cluster::GrpcSecurity{auth::ClusterToken({kToken, kOldToken}), {}});
  ASSERT_TRUE(s.server);
  expect_refused(call_agent_health(s.target, 5s), s.target, "no cluster token");
  expect_refused(
      call_agent_health(s.target, 5s,
                        cluster::GrpcSecurity{auth::ClusterToken({"not-the-token-0123456789"}), {}}),
      s.target, "wrong cluster token");
  for (const auto& t : {kToken, kOldToken}) {
    auto ok = call_agent_health(s.target, 5s, cluster::GrpcSecurity{auth::ClusterToken({t}), {}});
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    EXPECT_EQ(ok->record.node_id, "n1");
  }
}

class AgentGrpcTls : public ::testing::Test {
 protected:
  TempDir dir_;
  TestCa ca_{dir_.path(), "cluster"};
  TestCa other_{dir_.path(), "other"};
  CertFiles agent_ = ca_.issue("agent");
  CertFiles router_ = ca_.issue("router");
};

TEST_F(AgentGrpcTls, a_good_pair_connects_and_the_certificate_stands_in_for_the_token) {
  auto s = serve(cluster::GrpcSecurity{auth::ClusterToken({kToken}), tls_of(ca_, agent_)});
  ASSERT_TRUE(s.server);
  auto ok = call_agent_health(s.target, 5s, cluster::GrpcSecurity{{}, tls_of(ca_, router_)});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->record.node_id, "n1");
}

// Probe reproduction: the node record in plaintext to anyone.
TEST_F(AgentGrpcTls, plaintext_health_is_refused_when_tls_is_required) {
  auto s = serve(cluster::GrpcSecurity{{}, tls_of(ca_, agent_)});
  ASSERT_TRUE(s.server);
  expect_refused(call_agent_health(s.target, 3s), s.target);
}

TEST_F(AgentGrpcTls, a_server_certificate_from_another_ca_is_refused) {
  const CertFiles stranger = other_.issue("stranger");
  auto s = serve(cluster::GrpcSecurity{{}, tls_of(other_, stranger)});
  ASSERT_TRUE(s.server);
  expect_refused(call_agent_health(s.target, 3s, cluster::GrpcSecurity{{}, tls_of(ca_, router_)}), s.target);
}

TEST_F(AgentGrpcTls, a_client_certificate_from_another_ca_is_refused) {
  auto s = serve(cluster::GrpcSecurity{{}, tls_of(ca_, agent_)});
  ASSERT_TRUE(s.server);
  config::TlsConfig client = tls_of(ca_, other_.issue("intruder"));  // trusts the right CA
  expect_refused(call_agent_health(s.target, 3s, cluster::GrpcSecurity{{}, client}), s.target);
}

TEST_F(AgentGrpcTls, expired_certificates_are_refused_on_either_side) {
  const CertFiles expired = ca_.issue("expired", -7200, -3600);
  {
    auto s = serve(cluster::GrpcSecurity{{}, tls_of(ca_, agent_)});
    ASSERT_TRUE(s.server);
    expect_refused(call_agent_health(s.target, 3s, cluster::GrpcSecurity{{}, tls_of(ca_, expired)}),
                   s.target);
  }
  {
    auto s = serve(cluster::GrpcSecurity{{}, tls_of(ca_, expired)});
    ASSERT_TRUE(s.server);
    expect_refused(call_agent_health(s.target, 3s, cluster::GrpcSecurity{{}, tls_of(ca_, router_)}),
                   s.target);
  }
}

TEST_F(AgentGrpcTls, a_client_without_a_certificate_is_refused) {
  auto s = serve(cluster::GrpcSecurity{{}, tls_of(ca_, agent_)});
  ASSERT_TRUE(s.server);
  // TLS that trusts the agent but presents no certificate of its own.
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = cgn::testing::read_file(ca_.ca_file());
  auto stub = cognitora::v1::Agent::NewStub(grpc::CreateChannel(s.target, grpc::SslCredentials(o)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 3s);
  cognitora::v1::HealthRequest req;
  cognitora::v1::HealthResponse resp;
  const grpc::Status st = stub->Health(&ctx, req, &resp);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.error_code(), grpc::StatusCode::OK);
}

TEST_F(AgentGrpcTls, unreadable_certificate_files_are_named) {
  config::TlsConfig bad = tls_of(ca_, agent_);
  bad.key_file = dir_.file("absent-key.pem");
  auto s = AgentGrpcServer::start("127.0.0.1:0", sample_health, cluster::GrpcSecurity{{}, bad});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, GrpcError::kListen);
  EXPECT_NE(s.error().message.find("[tls] key_file"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("absent-key.pem"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace cgn::agent
