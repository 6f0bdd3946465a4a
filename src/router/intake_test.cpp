#include "router/intake.h"

#include <gtest/gtest.h>

namespace cgn::router {
namespace {

using namespace std::chrono_literals;

double sample(RouterMetrics& m, const std::string& series) {
  const std::string text = m.render();
  const std::string key = "\n" + series + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
}

http::Request request(std::string target, std::vector<std::pair<std::string, std::string>> headers = {}) {
  http::Request r{http::Verb::post, target, 11};
  for (const auto& [k, v] : headers) {
    r.set(k, v);
  }
  return r;
}

TEST(Intake, rejections_are_counted_every_time_and_logged_once_per_reason_and_client_per_interval) {
  RouterMetrics m;
  RejectionLog log(m, 1h);
  log.note(reject_reason::kAuth, "10.0.0.7:1000");
  log.note(reject_reason::kAuth, "10.0.0.7:1001");  // same address, other port: same client
  log.note(reject_reason::kConnections, "10.0.0.7:1002");
  log.note(reject_reason::kAuth, "10.0.0.8:1000");
  EXPECT_EQ(log.lines(), 3u);  // .7 auth, .7 connections, .8 auth
  EXPECT_EQ(sample(m, "cgn_router_rejections_total{reason=\"auth\"}"), 3.0);
  EXPECT_EQ(sample(m, "cgn_router_rejections_total{reason=\"connections\"}"), 1.0);
  RejectionLog every(m, 0ms);
  every.note(reject_reason::kAuth, "10.0.0.7:1000");
  every.note(reject_reason::kAuth, "10.0.0.7:1000");
  EXPECT_EQ(every.lines(), 2u);
}

TEST(Intake, the_rejection_log_stays_bounded_under_many_addresses) {
  RouterMetrics m;
  RejectionLog log(m, 1h, /*max_clients=*/4);
  for (int i = 0; i < 100; ++i) {
    log.note(reject_reason::kAuth, "10.0.0." + std::to_string(i) + ":1");
  }
  EXPECT_EQ(log.lines(), 100u);  // each new address is logged once; the table forgets, not grows
  EXPECT_EQ(sample(m, "cgn_router_rejections_total{reason=\"auth\"}"), 100.0);
}

TEST(Intake, the_client_keeps_its_request_id_and_the_engines_get_one_the_router_made) {
  const RequestIds a = request_ids(request("/v1/chat/completions", {{"X-Request-Id", "tenant-id-1"}}));
  const RequestIds b = request_ids(request("/v1/chat/completions", {{"X-Request-Id", "tenant-id-1"}}));
  EXPECT_EQ(a.client, "tenant-id-1");
  EXPECT_TRUE(a.upstream.starts_with("cgn-")) << a.upstream;
  EXPECT_EQ(a.upstream.size(), 36u);
  EXPECT_NE(a.upstream, b.upstream);  // two tenants sending one id never meet at a node
  const RequestIds none = request_ids(request("/v1/chat/completions"));
  EXPECT_EQ(none.client, none.upstream);
  const RequestIds bad = request_ids(request("/v1/chat/completions", {{"X-Request-Id", "has space"}}));
  EXPECT_EQ(bad.client, bad.upstream);
}

TEST(Intake, check_head_wants_the_api_key_on_v1_and_the_metrics_key_on_metrics) {
  auto api = ApiKeys::parse("sk-api-0123456789abcdef\n", "keys");
  auto metrics_key = ApiKeys::parse("mk-metrics-0123456789\n", "metrics");
  ASSERT_TRUE(api.ok() && metrics_key.ok());
  RouterMetrics m;
  RejectionLog log(m, 1h);
  const IntakeKeys keys{&*api, &*metrics_key};
  const auto refused =
      check_head(keys, log, request("/v1/chat/completions", {{"X-Request-Id", "r-1"}}), "1.2.3.4:5");
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->result_int(), 401u);
  EXPECT_EQ((*refused)["X-Request-Id"], "r-1");
  EXPECT_NE(refused->body().find("authentication_error"), std::string::npos) << refused->body();
  EXPECT_TRUE(check_head(keys, log, request("/v1/models"), "1.2.3.4:5").has_value());
  EXPECT_FALSE(
      check_head(keys, log,
                 request("/v1/chat/completions", {{"Authorization", "Bearer sk-api-0123456789abcdef"}}),
                 "1.2.3.4:5")
          .has_value());
  EXPECT_FALSE(check_head(keys, log, request("/health"), "1.2.3.4:5").has_value());
  // /metrics: its own key; the API key does not open it; a CORS preflight needs none.
  EXPECT_TRUE(check_head(keys, log,
                         request("/metrics", {{"Authorization", "Bearer sk-api-0123456789abcdef"}}),
                         "1.2.3.4:5")
                  .has_value());
  EXPECT_FALSE(check_head(keys, log, request("/metrics", {{"Authorization", "Bearer mk-metrics-0123456789"}}),
                          "1.2.3.4:5")
                   .has_value());
  http::Request preflight{http::Verb::options, "/metrics", 11};
  EXPECT_FALSE(check_head(keys, log, preflight, "1.2.3.4:5").has_value());
  EXPECT_EQ(sample(m, "cgn_router_rejections_total{reason=\"auth\"}"), 2.0);
  EXPECT_EQ(sample(m, "cgn_router_rejections_total{reason=\"metrics_auth\"}"), 1.0);
  // Nothing configured: everything is open.
  EXPECT_FALSE(check_head(IntakeKeys{}, log, request("/v1/chat/completions"), "1.2.3.4:5").has_value());
  EXPECT_FALSE(check_head(IntakeKeys{}, log, request("/metrics"), "1.2.3.4:5").has_value());
}

}  // namespace
}  // namespace cgn::router
