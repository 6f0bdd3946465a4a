#include "router/router_metrics.h"

#include <gtest/gtest.h>

namespace cgn::router {
namespace {

NodeSnapshot node(std::string name, std::optional<double> watts) {
  NodeSnapshot n;
  n.name = std::move(name);
  n.models = {"m"};
  n.engine = "vllm";
  n.role = "both";
  n.up = true;
  n.power_watts = watts;
  return n;
}

TEST(RouterMetrics, ClusterPowerTotalIsUntypedAndSumsTheNodes) {
  RouterMetrics m;
  m.refresh_cluster({node("a", 300), node("b", 250.5)}, 1.5);
  const std::string text = m.render();
  EXPECT_NE(text.find("# TYPE cgn_cluster_power_watts_total untyped\ncgn_cluster_power_watts_total 550.5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cgn_cluster_tokens_per_watt 1.5\n"), std::string::npos);
  EXPECT_NE(
      text.find(
          "cgn_cluster_node_info{node=\"a\",model=\"m\",engine=\"vllm\",role=\"both\",gpu_name=\"\"} 1"),
      std::string::npos);
}

TEST(RouterMetrics, UnknownPowerHasNoSampleAndOnlyKnownPowerIsSummed) {
  RouterMetrics m;
  m.refresh_cluster({node("a", std::nullopt), node("b", std::nullopt)}, std::nullopt);
  std::string text = m.render();
  EXPECT_NE(text.find("# TYPE cgn_cluster_power_watts_total untyped\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("\ncgn_cluster_power_watts_total "), std::string::npos) << text;
  EXPECT_EQ(text.find("\ncgn_cluster_node_power_watts{"), std::string::npos) << text;
  EXPECT_EQ(text.find("\ncgn_cluster_node_watt_limit{"), std::string::npos) << text;
  EXPECT_EQ(text.find("\ncgn_cluster_tokens_per_watt "), std::string::npos) << text;
  EXPECT_NE(text.find("cgn_cluster_node_up{node=\"a\"} 1\n"), std::string::npos) << text;
  // One node reports: its series and the total appear; the other node still has none.
  m.refresh_cluster({node("a", 120.5), node("b", std::nullopt)}, 0.25);
  text = m.render();
  EXPECT_NE(text.find("cgn_cluster_node_power_watts{node=\"a\"} 120.5\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("cgn_cluster_node_power_watts{node=\"b\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncgn_cluster_power_watts_total 120.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncgn_cluster_tokens_per_watt 0.25\n"), std::string::npos) << text;
}

NodeSnapshot energy_node(std::string name, std::optional<double> joules) {
  NodeSnapshot n = node(std::move(name), 100);
  n.energy_joules = joules;
  return n;
}

bool has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(RouterMetrics, JoulesPerTokenComesFromEnergyAndTokenDeltas) {
  RouterMetrics m;
  m.tokens("m", 0, 100, "a");  // before the first refresh: not in any window
  m.refresh_cluster({energy_node("a", 1000), energy_node("b", 500), energy_node("c", std::nullopt)},
                    std::nullopt);
  std::string text = m.render();
  EXPECT_TRUE(has(text, "cgn_cluster_node_energy_joules_total{node=\"a\"} 1000")) << text;
  EXPECT_TRUE(has(text, "cgn_cluster_node_energy_joules_total{node=\"b\"} 500")) << text;
  EXPECT_EQ(text.find("cgn_cluster_node_energy_joules_total{node=\"c\"}"), std::string::npos) << text;
  // One refresh is no window yet: no J/token.
  EXPECT_EQ(text.find("\ncgn_cluster_joules_per_token "), std::string::npos) << text;
  EXPECT_EQ(text.find("\ncgn_cluster_node_joules_per_token{"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE cgn_cluster_joules_per_token gauge"), std::string::npos) << text;

  m.tokens("m", 10, 200, "a");  // a: 600 J over 200 tokens = 3 J/token
  m.tokens("m", 10, 50, "b");   // b: 100 J over 50 tokens = 2 J/token
  m.tokens("m", 10, 70, "c");   // c: tokens, but no energy
  m.refresh_cluster({energy_node("a", 1600), energy_node("b", 600), energy_node("c", std::nullopt)},
                    std::nullopt);
  text = m.render();
  EXPECT_TRUE(has(text, "cgn_cluster_node_joules_per_token{node=\"a\"} 3")) << text;
  EXPECT_TRUE(has(text, "cgn_cluster_node_joules_per_token{node=\"b\"} 2")) << text;
  EXPECT_EQ(text.find("cgn_cluster_node_joules_per_token{node=\"c\"}"), std::string::npos) << text;
  EXPECT_TRUE(has(text, "cgn_cluster_joules_per_token 2.8")) << text;  // 700 J / 250 tokens

  // No tokens in the next window, and b's counter went backwards (agent restart): no samples.
  m.refresh_cluster({energy_node("a", 1700), energy_node("b", 10)}, std::nullopt);
  text = m.render();
  EXPECT_EQ(text.find("\ncgn_cluster_node_joules_per_token{"), std::string::npos) << text;
  EXPECT_EQ(text.find("\ncgn_cluster_joules_per_token "), std::string::npos) << text;
  EXPECT_TRUE(has(text, "cgn_cluster_node_energy_joules_total{node=\"b\"} 10")) << text;
}

TEST(RouterMetrics, AMirrorRefreshDropsNodesThatLeft) {
  RouterMetrics m;
  m.refresh_cluster({node("a", 0), node("gone", 0)}, 0);
  EXPECT_NE(m.render().find("node=\"gone\""), std::string::npos);
  m.refresh_cluster({node("a", 0)}, 0);
  EXPECT_EQ(m.render().find("node=\"gone\""), std::string::npos);
}

TEST(RouterMetrics, RequestsTokensAndRejectionsAreCounted) {
  RouterMetrics m;
  m.request_done("m", "chat", 200, 0.1);
  m.request_done("m", "chat", 200, 0.2);
  m.tokens("m", 10, 5);
  m.tokens("m", 0, 7);
  m.admission_rejected("m", "queue_full");
  const std::string text = m.render();
  EXPECT_NE(text.find("cgn_router_requests_total{model=\"m\",endpoint=\"chat\",code=\"200\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("cgn_router_generation_tokens_total{model=\"m\"} 12\n"), std::string::npos);
  EXPECT_EQ(m.generation_tokens_total(), 12.0);
  EXPECT_NE(text.find("cgn_router_admission_rejections_total{model=\"m\",reason=\"queue_full\"} 1\n"),
            std::string::npos);
  // Every family exists from the start, even before its first event.
  EXPECT_NE(text.find("# TYPE cgn_router_federation_forwards_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE cgn_router_retries_total counter"), std::string::npos);
}

}  // namespace
}  // namespace cgn::router
