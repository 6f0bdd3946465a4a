// [router.grpc] keys: off by default, every key read, TLS both-or-neither, mutual TLS needing TLS,
// errors naming file, line and key, unknown keys rejected, and the dump reading back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config.h"
#include "testing/config_env.h"

namespace cgn::config {
namespace {

using ::testing::HasSubstr;

Result<CognitoraConfig, ConfigError> load(std::string_view text) {
  return cgn::testing::load_toml(text);
}
std::string error_of(std::string_view text) {
  return cgn::testing::load_error(text);
}

TEST(ConfigGrpc, OffByDefault) {
  auto r = load("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->router.grpc, GrpcConfig{});
  EXPECT_TRUE(r->router.grpc.listen.empty());
}

TEST(ConfigGrpc, ReadsEveryKeyAndDumpsBack) {
  auto r = load(R"([router.grpc]
listen = "0.0.0.0:50051"
tls_cert = "/etc/c.pem"
tls_key = "/etc/k.pem"
tls_client_ca = "/etc/ca.pem"
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GrpcConfig& g = r->router.grpc;
  EXPECT_EQ(g.listen, "0.0.0.0:50051");
  EXPECT_EQ(g.tls_cert, "/etc/c.pem");
  EXPECT_EQ(g.tls_key, "/etc/k.pem");
  EXPECT_EQ(g.tls_client_ca, "/etc/ca.pem");
  auto again = load(dump_config(*r));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->router.grpc, g);
}

TEST(ConfigGrpc, ErrorsNameFileLineAndKey) {
  EXPECT_THAT(error_of("[router.grpc]\nlisten = \"nohost\"\n"),
              AllOf(HasSubstr("cognitora.toml:2"), HasSubstr("router.grpc.listen")));
  EXPECT_THAT(error_of("[router.grpc]\ntls_cert = \"/c.pem\"\n"),
              AllOf(HasSubstr("router.grpc.tls_cert"), HasSubstr("router.grpc.tls_key")));
  EXPECT_THAT(error_of("[router.grpc]\ntls_client_ca = \"/ca.pem\"\n"),
              HasSubstr("router.grpc.tls_client_ca"));
  EXPECT_THAT(error_of("[router.grpc]\nport = 50051\n"),
              AllOf(HasSubstr("cognitora.toml:2"), HasSubstr("router.grpc.port")));
}

}  // namespace
}  // namespace cgn::config
