// The etcd client against a real etcd over TLS with auth: https:// endpoints with a CA and a
// client certificate (etcd --client-cert-auth), certificates made here (testing/test_certs.h);
// username/password auth with a short --auth-token-ttl, and an etcd restart that forgets every
// token, so unary calls, the watch stream and the lease keep-alive stream must re-authenticate
// and carry on without losing events or the lease.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "state/etcd/etcd_client.h"
#include "state/etcd/lease_keeper.h"
#include "state/etcd/watcher.h"
#include "testing/etcd_server.h"
#include "testing/process.h"
#include "testing/test_certs.h"

namespace cgn::etcd {
namespace {

using namespace std::chrono_literals;
using cgn::testing::wait_until;

constexpr const char* kPassword = "etcd-root-password";

struct SecureEtcd {
  cgn::testing::TempDir dir;
  cgn::testing::TestCa ca{dir.path(), "etcd"};
  cgn::testing::CertFiles server = ca.issue("etcd-server");
  cgn::testing::CertFiles client = ca.issue("etcd-client");
  cgn::testing::EtcdServer etcd;

  explicit SecureEtcd(std::vector<std::string> flags = {}) {
    etcd.use_tls({server.cert, server.key, ca.ca_file()});
    etcd.add_flags(std::move(flags));
  }
  std::string https() const { return "https://" + etcd.endpoint(); }
  EtcdClientOptions options() const {
    EtcdClientOptions o;
    o.endpoints = {https()};
    o.ca_file = ca.ca_file();
    o.cert_file = client.cert;
    o.key_file = client.key;
    o.call_timeout = 3000ms;
    return o;
  }
};

TEST(EtcdSecure, https_endpoint_with_a_ca_and_a_client_certificate) {
  SecureEtcd s;
  ASSERT_TRUE(s.etcd.start()) << s.etcd.log();
  auto client = EtcdClient::create(s.options());
  ASSERT_TRUE(client.ok()) << client.error().message;
  ASSERT_TRUE((*client)->put("/tls/k", "v").ok());
  auto got = (*client)->get("/tls/k");
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->kvs.size(), 1u);
  EXPECT_EQ(got->kvs[0].value, "v");

  // No client certificate: etcd refuses the handshake.
  auto no_cert_opts = s.options();
  no_cert_opts.cert_file.clear();
  no_cert_opts.key_file.clear();
  no_cert_opts.call_timeout = 1000ms;
  auto no_cert = EtcdClient::create(no_cert_opts);
  ASSERT_TRUE(no_cert.ok()) << no_cert.error().message;
  auto refused = (*no_cert)->get("/tls/k");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find(s.etcd.endpoint()), std::string::npos) << refused.error().message;

  // A CA that did not sign etcd's certificate.
  cgn::testing::TestCa other(s.dir.path(), "other");
  auto wrong_ca_opts = s.options();
  wrong_ca_opts.ca_file = other.ca_file();
  wrong_ca_opts.call_timeout = 1000ms;
  auto wrong_ca = EtcdClient::create(wrong_ca_opts);
  ASSERT_TRUE(wrong_ca.ok());
  EXPECT_FALSE((*wrong_ca)->get("/tls/k").ok());

  // https without a CA is a configuration error at once, not a failure at run time.
  auto no_ca_opts = s.options();
  no_ca_opts.ca_file.clear();
  auto no_ca = EtcdClient::create(no_ca_opts);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.error().message.find("ca_file"), std::string::npos);
}

struct Events {
  std::mutex mu;
  std::vector<std::string> keys;
  WatchCallback callback() {
    return [this](const WatchUpdate& up) {
      std::lock_guard lock(mu);
      for (const auto& e : up.events) {
        keys.push_back(e.kv.key);
      }
    };
  }
  bool has(const std::string& k) {
    std::lock_guard lock(mu);
    return std::find(keys.begin(), keys.end(), k) != keys.end();
  }
  size_t count(const std::string& k) {
    std::lock_guard lock(mu);
    return static_cast<size_t>(std::count(keys.begin(), keys.end(), k));
  }
};

TEST(EtcdSecure, auth_tokens_are_renewed_and_streams_survive_reauthentication) {
  SecureEtcd s({"--auth-token=simple", "--auth-token-ttl=1"});
  ASSERT_TRUE(s.etcd.start()) << s.etcd.log();
  ASSERT_EQ(s.etcd.enable_auth(kPassword), "");

  // A wrong password is an auth error that says so.
  auto bad_opts = s.options();
  bad_opts.username = "root";
  bad_opts.password = "wrong";
  auto bad = EtcdClient::create(bad_opts);
  ASSERT_TRUE(bad.ok());
  auto refused = (*bad)->put("/auth/x", "v");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, EtcdErrc::kAuth) << refused.error().message;
  EXPECT_NE(refused.error().message.find("Authenticate as \"root\""), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(refused.error().message.find("wrong"), std::string::npos);  // never the password

  auto opts = s.options();
  opts.username = "root";
  opts.password = kPassword;
  auto client_r = EtcdClient::create(opts);
  ASSERT_TRUE(client_r.ok()) << client_r.error().message;
  auto client = *client_r;
  auto start = client->put("/auth/k0", "v");
  ASSERT_TRUE(start.ok()) << start.error().message;
  EXPECT_EQ(client->authentications(), 1u);

  Events events;
  auto watcher = Watcher::prefix(client, "/auth/", start->revision + 1, events.callback());
  auto keeper = LeaseKeeper::start(client, LeaseKeeperOptions{.ttl_seconds = 10});
  ASSERT_TRUE(keeper.ok()) << keeper.error().message;
  const int64_t lease = (*keeper)->lease_id();
  ASSERT_TRUE(client->put("/auth/leased", "alive", lease).ok());
  ASSERT_TRUE(wait_until([&] { return events.has("/auth/leased"); }, 10s));

  // Idle past the 1 s token TTL while only the keep-alive stream talks, then a unary call.
  const uint64_t acked = (*keeper)->keepalives_acked();
  ASSERT_TRUE(wait_until([&] { return (*keeper)->keepalives_acked() >= acked + 2; }, 20s));
  auto after_idle = client->put("/auth/k1", "v");
  ASSERT_TRUE(after_idle.ok()) << after_idle.error().message;
  ASSERT_TRUE(wait_until([&] { return events.has("/auth/k1"); }, 10s));

  // A restart forgets every simple token: all three paths must authenticate again.
  const uint64_t auths = client->authentications();
  s.etcd.stop();
  ASSERT_TRUE(s.etcd.start()) << s.etcd.log();
  ASSERT_TRUE(wait_until([&] { return client->put("/auth/k2", "v").ok(); }, 20s));
  EXPECT_GT(client->authentications(), auths);
  EXPECT_TRUE(wait_until([&] { return events.has("/auth/k2"); }, 20s)) << "the watch did not resume";
  const uint64_t acked_after = (*keeper)->keepalives_acked();
  EXPECT_TRUE(wait_until([&] { return (*keeper)->keepalives_acked() >= acked_after + 2; }, 20s))
      << "keep-alives did not resume";
  EXPECT_EQ((*keeper)->lease_id(), lease);
  auto leased = client->get("/auth/leased");
  ASSERT_TRUE(leased.ok()) << leased.error().message;
  EXPECT_EQ(leased->kvs.size(), 1u);
  EXPECT_EQ(events.count("/auth/k1"), 1u);  // resumed without duplicates
  watcher->stop();
  (*keeper)->stop();
}

}  // namespace
}  // namespace cgn::etcd
