#include "router/options.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "testing/process.h"

namespace cgn::router {
namespace {

Result<RouterSetup, OptionsError> parse(std::vector<const char*> args,
                                        const std::string& dashboard = "/nonexistent") {
  args.insert(args.begin(), "cgn-router");
  return parse_router_options(static_cast<int>(args.size()), args.data(), "/nonexistent/bin", dashboard);
}

TEST(RouterOptions, QuickLabFlagsBuildNodesAndPolicy) {
  auto s = parse({"--listen", "127.0.0.1:0", "--node", "http://127.0.0.1:8001", "--node",
                  "http://127.0.0.1:8002", "--policy", "least_load", "--threads", "3"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->gateway.router.listen, "127.0.0.1:0");
  ASSERT_EQ(s->gateway.router.nodes.size(), 2u);
  EXPECT_EQ(s->gateway.router.nodes[1].url, "http://127.0.0.1:8002");
  EXPECT_EQ(s->gateway.router.policy, "least_load");
  EXPECT_EQ(s->gateway.threads, 3u);
  EXPECT_EQ(s->poll_interval, std::chrono::milliseconds(1000));
  EXPECT_TRUE(s->config_path.empty());
}

TEST(RouterOptions, RejectsAnUnknownPolicyAndABadListenAddress) {
  auto p = parse({"--policy", "fastest"});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("\"fastest\""), std::string::npos);
  auto l = parse({"--listen", "8080"});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().message.find("HOST:PORT"), std::string::npos);
}

TEST(RouterOptions, ConfigFileWithFlagOverrides) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("c.toml"), R"([router]
listen = "127.0.0.1:9000"
policy = "session"
[router.timeouts]
health_interval_ms = 250
[[router.nodes]]
url = "http://10.0.0.1:8000"
name = "gpu-1"
)");
  const std::string path = dir.file("c.toml");
  auto s = parse({"--config", path.c_str(), "--policy", "random"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->gateway.router.listen, "127.0.0.1:9000");
  EXPECT_EQ(s->gateway.router.policy, "random");
  ASSERT_EQ(s->gateway.router.nodes.size(), 1u);
  EXPECT_EQ(s->gateway.router.nodes[0].name, "gpu-1");
  EXPECT_EQ(s->poll_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(s->config_path, path);
}

TEST(RouterOptions, ABadConfigFileIsAnError) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("c.toml"), "[router]\nlisten = 5\n");
  const std::string path = dir.file("c.toml");
  auto s = parse({"--config", path.c_str()});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, OptionsError::kConfig);
}

TEST(RouterOptions, DashboardDirDefaultsToTheSourceTree) {
  const std::string src = cgn::testing::source_path("dashboard");
  auto s = parse({}, src);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->gateway.dashboard_dir, src);
  auto t = parse({"--dashboard-dir", "/srv/dash"}, src);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->gateway.dashboard_dir, "/srv/dash");
}

TEST(RouterOptions, AnInstalledDashboardBesideTheBinaryWinsOverTheSourceTree) {
  cgn::testing::TempDir prefix;
  const std::string installed = prefix.path() + "/bin/../share/cognitora/dashboard";
  std::filesystem::create_directories(prefix.path() + "/bin");
  std::filesystem::create_directories(installed);
  cgn::testing::write_file(installed + "/index.html", "<html></html>");
  const std::string src = cgn::testing::source_path("dashboard");
  std::vector<const char*> args = {"cgn-router"};
  auto s = parse_router_options(1, args.data(), prefix.path() + "/bin", src);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->gateway.dashboard_dir, installed);
}

TEST(RouterOptions, ApiKeysComeFromTheFileAndTheEnvironment) {
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("keys"), "sk-file-0123456789abcdef\n");
  ::setenv("CGN_ROUTER_TEST_KEYS", "sk-env-a-0123456789abcdef, sk-env-b-0123456789abcdef", 1);
  cgn::testing::write_file(dir.file("c.toml"), "[router]\napi_keys_file = \"" + dir.file("keys") +
                                                   "\"\napi_keys_env = \"CGN_ROUTER_TEST_KEYS\"\n");
  const std::string path = dir.file("c.toml");
  auto s = parse({"--config", path.c_str()});
  ::unsetenv("CGN_ROUTER_TEST_KEYS");
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto keys = load_api_keys(s->config.router);
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  EXPECT_EQ(keys->size(), 3u);
  EXPECT_TRUE(keys->check_token("sk-file-0123456789abcdef"));
  EXPECT_TRUE(keys->check_token("sk-env-b-0123456789abcdef"));
  config::RouterConfig missing;
  missing.api_keys_file = dir.file("absent");
  EXPECT_FALSE(load_api_keys(missing).ok());
}

TEST(RouterOptions, ListenParsing) {
  auto a = parse_listen("[::1]:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->first, "::1");
  EXPECT_EQ(a->second, 8080);
  EXPECT_FALSE(parse_listen("host:70000").ok());
  EXPECT_FALSE(parse_listen(":80").ok());
}

}  // namespace
}  // namespace cgn::router
