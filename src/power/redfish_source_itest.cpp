// Redfish against a fake BMC on loopback: both schemas, Basic auth, one session reused, a 401 after
// the BMC drops the session answered by one new login, and the session deleted at the end; over
// HTTPS, the BMC's certificate verified against `ca_file`.
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "power/fake_http.h"
#include "power/reader.h"
#include "power/redfish_source.h"
#include "testing/process.h"
#include "testing/test_certs.h"

namespace cgn::power {
namespace {

using Request = http::Request;

struct FakeBmc {
  testing::FakeHttp http;
  std::mutex mu;
  std::string valid_token;
  int logins = 0;
  int deletes = 0;
  std::string power_body = R"({"@odata.id":"/redfish/v1/Chassis/1/Power","PowerControl":[{"MemberId":"0",
      "PowerConsumedWatts":512.5,"PowerLimit":{"LimitInWatts":1200},"PowerMetrics":{"AverageConsumedWatts":498,
      "IntervalInMin":1}}]})";
  double energy_joules = 3'600'000.25;

  explicit FakeBmc(http::ServerConfig server = {}) : http(std::move(server)) {
    http.on(http::Verb::post, "/redfish/v1/SessionService/Sessions", [this](const Request& r) {
      auto body = nlohmann::json::parse(r.body(), nullptr, false);
      if (body.is_discarded() || body.value("UserName", "") != "admin" ||
          body.value("Password", "") != "s3cret") {
        return http::make_response(401, R"({"error":{"code":"Base.1.0.NoValidSession"}})");
      }
      std::lock_guard lock(mu);
      ++logins;
      valid_token = "token-" + std::to_string(logins);
      http::Response res = http::make_response(201, "{}");
      res.set("X-Auth-Token", valid_token);
      res.set(http::Field::location, "/redfish/v1/SessionService/Sessions/" + std::to_string(logins));
      return res;
    });
    http.on(http::Verb::delete_, "/redfish/v1/SessionService/Sessions/1",
            [this](const Request& r) { return drop(r); });
    http.on(http::Verb::delete_, "/redfish/v1/SessionService/Sessions/2",
            [this](const Request& r) { return drop(r); });
    http.on(http::Verb::get, "/redfish/v1/Chassis/1/Power", [this](const Request& r) {
      return authorised(r) ? http::make_response(200, power_body) : unauthorised();
    });
    http.on(http::Verb::get, "/redfish/v1/Chassis/Self/EnvironmentMetrics", [this](const Request& r) {
      if (!authorised(r)) {
        return unauthorised();
      }
      std::lock_guard lock(mu);
      return http::make_response(
          200,
          fmt::format(
              R"({{"PowerWatts":{{"Reading":730.0,"DataSourceUri":"/redfish/v1/Chassis/Self/Sensors/PS"}},
                               "EnergyJoules":{{"Reading":{:.2f}}},"EnergykWh":{{"Reading":1.0}},
                               "PowerLimitWatts":{{"SetPoint":900}}}})",
              energy_joules));
    });
  }
  bool authorised(const Request& r) {
    std::lock_guard lock(mu);
    if (r["Authorization"] == "Basic YWRtaW46czNjcmV0") {  // admin:s3cret
      return true;
    }
    return !valid_token.empty() && r["X-Auth-Token"] == valid_token;
  }
  static http::Response unauthorised() {
    return http::make_response(401, R"({"error":{"code":"Base.1.0.NoValidSession"}})");
  }
  http::Response drop(const Request& r) {
    std::lock_guard lock(mu);
    if (r["X-Auth-Token"] == valid_token) {
      ++deletes;
      valid_token.clear();
    }
    return http::make_response(204, "");
  }
  config::PowerSourceConfig source(std::string schema, std::string auth, std::string chassis = "1") const {
    config::PowerSourceConfig sc;
    sc.name = "bmc";
    sc.kind = "redfish";
    sc.url = http.url();
    sc.device = std::move(chassis);
    sc.redfish_schema = std::move(schema);
    sc.auth = std::move(auth);
    sc.username = "admin";
    sc.password = config::Secret("s3cret", "BMC_PASSWORD");
    return sc;
  }
};

TEST(RedfishSource, legacy_power_resource_with_basic_auth) {
  FakeBmc bmc;
  auto src = make_redfish_source(bmc.source("power", "basic"));
  ASSERT_TRUE(src.ok());
  auto got = src.value()->read();
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got.value().size(), 1u);
  EXPECT_EQ(got.value()[0].device, "1");
  EXPECT_EQ(got.value()[0].watts, 512.5);
  EXPECT_EQ(got.value()[0].power_limit_watts, 1200.0);
  EXPECT_FALSE(got.value()[0].counter_uj.has_value());
  EXPECT_EQ(bmc.logins, 0);
}

TEST(RedfishSource, one_session_is_reused_and_a_401_logs_in_again_once) {
  FakeBmc bmc;
  {
    auto src = make_redfish_source(bmc.source("power", "session"));
    ASSERT_TRUE(src.ok());
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(src.value()->read().ok());
    }
    EXPECT_EQ(bmc.logins, 1);
    {
      std::lock_guard lock(bmc.mu);
      bmc.valid_token = "expired-by-the-bmc";
    }
    auto got = src.value()->read();
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(bmc.logins, 2);
    for (const auto& r : bmc.http.requests()) {
      EXPECT_EQ(r["Authorization"], "");  // session auth never sends the password on reads
    }
  }
  EXPECT_EQ(bmc.deletes, 1);  // the session is deleted when the source goes
}

TEST(RedfishSource, wrong_password_is_a_failure_naming_the_user_not_the_password) {
  FakeBmc bmc;
  auto sc = bmc.source("power", "session");
  sc.password = config::Secret("wrong", "BMC_PASSWORD");
  auto got = make_redfish_source(sc).value()->read();
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message.find("admin"), std::string::npos);
  EXPECT_EQ(got.error().message.find("wrong"), std::string::npos);
}

TEST(RedfishSource, environment_metrics_energy_counts_exactly_through_the_reader) {
  FakeBmc bmc;
  config::PowerConfig cfg;
  cfg.sources.push_back(bmc.source("environment", "session", "Self"));
  auto reader = Reader::from_config(cfg);
  ASSERT_TRUE(reader.ok());
  reader.value()->poll();
  {
    std::lock_guard lock(bmc.mu);
    bmc.energy_joules += 1234.5;
  }
  reader.value()->poll();
  Snapshot s = reader.value()->snapshot();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].latest.device, "Self");
  EXPECT_EQ(s.devices[0].latest.watts, 730.0);
  EXPECT_EQ(s.devices[0].latest.power_limit_watts, 900.0);
  EXPECT_EQ(s.devices[0].energy_uj, 1'234'500'000u);
  EXPECT_TRUE(s.devices[0].from_counter);
}

// A BMC on loopback with a certificate from a site CA of the test's own.
struct TlsBmc {
  cgn::testing::TempDir dir;
  cgn::testing::TestCa ca{dir.path(), "site"};
  cgn::testing::TestCa other{dir.path(), "other"};
  std::unique_ptr<FakeBmc> bmc;
  TlsBmc() {
    auto leaf = ca.issue("bmc");
    http::ServerConfig sc;
    sc.tls_cert_file = leaf.cert;
    sc.tls_key_file = leaf.key;
    bmc = std::make_unique<FakeBmc>(std::move(sc));
  }
};

TEST(RedfishSource, https_bmc_is_read_when_its_certificate_chains_to_ca_file) {
  TlsBmc t;
  auto sc = t.bmc->source("power", "basic");
  ASSERT_TRUE(sc.url.starts_with("https://")) << sc.url;
  sc.ca_file = t.ca.ca_file();
  auto src = make_redfish_source(sc);
  ASSERT_TRUE(src.ok()) << src.error().message;
  auto got = src.value()->read();
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got.value().size(), 1u);
  EXPECT_EQ(got.value()[0].watts, 512.5);
}

TEST(RedfishSource, https_bmc_with_a_certificate_ca_file_does_not_sign_is_unavailable) {
  TlsBmc t;
  for (const std::string& ca : {t.other.ca_file(), std::string()}) {  // another CA; the system CAs
    auto sc = t.bmc->source("power", "basic");
    sc.ca_file = ca;
    auto src = make_redfish_source(sc);
    ASSERT_TRUE(src.ok()) << src.error().message;
    auto got = src.value()->read();
    ASSERT_FALSE(got.ok()) << "ca_file=" << ca;
    EXPECT_EQ(got.error().code, SourceError::kUnavailable) << got.error().message;
  }
  EXPECT_TRUE(t.bmc->http.requests().empty());  // no request got past the handshake
}

TEST(RedfishSource, ca_file_that_is_missing_or_on_plain_http_is_a_config_error) {
  FakeBmc bmc;
  auto sc = bmc.source("power", "basic");
  sc.ca_file = "/nonexistent/ca.pem";
  auto missing = make_redfish_source(sc);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, SourceError::kConfig);
  EXPECT_NE(missing.error().message.find("/nonexistent/ca.pem"), std::string::npos);
  cgn::testing::TempDir dir;
  cgn::testing::TestCa ca(dir.path(), "site");
  sc.ca_file = ca.ca_file();
  auto plain = make_redfish_source(sc);  // http:// with a CA: a mistake worth naming
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.error().message.find("https"), std::string::npos);
}

TEST(RedfishParse, kwh_counter_when_no_joules_and_garbage_is_bad_data) {
  PowerSample proto;
  auto kwh = parse_redfish_environment(R"({"EnergykWh":{"Reading":2.5}})", proto);
  ASSERT_TRUE(kwh.ok());
  EXPECT_EQ(kwh.value().counter_uj, 9'000'000'000'000u);  // 2.5 kWh = 9 MJ
  EXPECT_FALSE(kwh.value().watts.has_value());
  EXPECT_FALSE(parse_redfish_environment(R"({"PowerWatts":{"Reading":"lots"}})", proto).ok());
  EXPECT_FALSE(parse_redfish_power(R"({"PowerControl":[]})", proto).ok());
  EXPECT_FALSE(parse_redfish_power("[[[[", proto).ok());
  EXPECT_FALSE(parse_redfish_power(std::string(100, '[') + std::string(100, ']'), proto).ok());
}

}  // namespace
}  // namespace cgn::power
