// mTLS on cgn-kvcached's gRPC port ([tls], the shared helper core/tls/grpc_tls.h) with
// certificates made at run time (testing/test_certs.h): a client with a certificate the CA signed
// works; a TLS client without a certificate and a plaintext client are refused.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cognitora/v1/kvcached.grpc.pb.h"
#include "kvcached/kv_client.h"
#include "kvcached/kvcached_itest_util.h"
#include "testing/test_certs.h"

namespace cgn::kvcached {
namespace {

using namespace itest;
using testing::TempDir;
using testing::TestCa;

TEST(KvcachedTls, OnlyClientsWithACertificateGetIn) {
  TempDir dir;
  TestCa ca(dir.path(), "cluster");
  const auto server = ca.issue("kvcached");
  const auto client = ca.issue("engine");
  Daemon d(dir, "kv", "ram_bytes = 8388608\nmax_block_bytes = 1048576\n",
           "[tls]\nca_file = \"" + ca.ca_file() + "\"\ncert_file = \"" + server.cert + "\"\nkey_file = \"" +
               server.key + "\"\nrequire_client_cert = true\n");
  ASSERT_TRUE(d.start());
  const std::string target = "localhost:" + std::to_string(d.port());

  config::TlsConfig good;
  good.ca_file = ca.ca_file();
  good.cert_file = client.cert;
  good.key_file = client.key;
  auto c = KvClient::connect(target, good);
  ASSERT_TRUE(c.ok()) << c.error().message;
  const auto bytes = block_bytes(1, 1, 100000);
  auto put = (*c)->put(test_ns(), digest_of(1, 1), bytes);
  ASSERT_TRUE(put.ok()) << put.error().message;
  auto got = (*c)->get(test_ns(), digest_of(1, 1));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(*got, bytes);

  // TLS, the server verified, but no client certificate.
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = testing::read_file(ca.ca_file());
  auto stub = cognitora::v1::KvCache::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(no_cert)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  cognitora::v1::StatsRequest req;
  cognitora::v1::StatsResponse resp;
  EXPECT_FALSE(stub->Stats(&ctx, req, &resp).ok()) << "a client without a certificate got in";

  // Plaintext.
  auto plain = KvClient::connect(target, {});
  ASSERT_TRUE(plain.ok());
  (*plain)->set_timeout_ms(5000);
  auto refused = (*plain)->stats();
  ASSERT_FALSE(refused.ok()) << "a plaintext client got in";
  EXPECT_EQ(refused.error().code, ClientError::kConnect) << refused.error().message;
}

}  // namespace
}  // namespace cgn::kvcached
