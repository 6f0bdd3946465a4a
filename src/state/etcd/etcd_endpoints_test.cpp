#include "state/etcd/etcd_endpoints.h"

#include <gtest/gtest.h>

namespace cgn::etcd {
namespace {

TEST(NormalizeEndpoint, accepts_host_port_and_http_and_https_urls) {
  EXPECT_EQ(normalize_endpoint("127.0.0.1:2379").value(), "127.0.0.1:2379");
  EXPECT_EQ(normalize_endpoint("http://etcd-0:2379/").value(), "etcd-0:2379");
  EXPECT_EQ(normalize_endpoint("https://etcd-0:2379").value(), "etcd-0:2379");
}

TEST(NormalizeEndpoint, rejects_malformed) {
  for (const char* bad : {"", "h", "h:", ":2379", "http://h:2379/path", "https://h:2379/path", "h:23x9"}) {
    auto r = normalize_endpoint(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, EtcdErrc::kInvalidArgument) << bad;
  }
}

TEST(EtcdClientCreate, rejects_missing_or_bad_endpoints) {
  EtcdClientOptions o;
  EXPECT_EQ(EtcdClient::create(o).error().code, EtcdErrc::kInvalidArgument);
  o.endpoints = {"127.0.0.1:2379", "https://127.0.0.1:2379"};
  auto r = EtcdClient::create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("mix https://"), std::string::npos) << r.error().message;
  o.endpoints = {"https://127.0.0.1:2379"};
  auto no_ca = EtcdClient::create(o);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.error().message.find("ca_file"), std::string::npos) << no_ca.error().message;
  o.ca_file = "/nonexistent/ca.pem";
  auto bad_ca = EtcdClient::create(o);
  ASSERT_FALSE(bad_ca.ok());
  EXPECT_NE(bad_ca.error().message.find("/nonexistent/ca.pem"), std::string::npos) << bad_ca.error().message;
  o.ca_file.clear();
  o.endpoints = {"127.0.0.1:2379"};
  o.username = "root";
  EXPECT_NE(EtcdClient::create(o).error().message.find("username and password"), std::string::npos);
}

TEST(MapGrpcError, maps_etcd_server_errors_to_codes) {
  struct Case {
    grpc::StatusCode code;
    const char* msg;
    EtcdErrc want;
  };
  const Case cases[] = {
      {grpc::StatusCode::UNAVAILABLE, "failed to connect", EtcdErrc::kUnavailable},
      {grpc::StatusCode::UNAVAILABLE, "etcdserver: no leader", EtcdErrc::kUnavailable},
      {grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded", EtcdErrc::kDeadlineExceeded},
      {grpc::StatusCode::OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted",
       EtcdErrc::kCompacted},
      {grpc::StatusCode::OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision",
       EtcdErrc::kFutureRevision},
      {grpc::StatusCode::NOT_FOUND, "etcdserver: requested lease not found", EtcdErrc::kLeaseNotFound},
      {grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: too many operations in txn request",
       EtcdErrc::kTooManyOps},
      {grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: request is too large", EtcdErrc::kRequestTooLarge},
      {grpc::StatusCode::INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request",
       EtcdErrc::kInvalidArgument},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, "Received message larger than max", EtcdErrc::kRequestTooLarge},
      {grpc::StatusCode::CANCELLED, "Cancelled", EtcdErrc::kCancelled},
      {grpc::StatusCode::INTERNAL, "boom", EtcdErrc::kInternal},
  };
  for (const auto& c : cases) {
    auto e = map_grpc_error(c.code, c.msg, "Txn", "127.0.0.1:2379");
    EXPECT_EQ(e.code, c.want) << c.msg;
    // The message names the call, the endpoint and the server's words.
    EXPECT_NE(e.message.find("Txn"), std::string::npos);
    EXPECT_NE(e.message.find("127.0.0.1:2379"), std::string::npos);
    EXPECT_NE(e.message.find(c.msg), std::string::npos);
  }
}

}  // namespace
}  // namespace cgn::etcd
