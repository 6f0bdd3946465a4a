#include "core/daemon/daemon.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/beast/http.hpp>

#include "core/http/client.h"
#include "core/http/server.h"
#include "testing/process.h"
#include "testing/run_on.h"

namespace cgn::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A daemon with one flag of its own, --widgets, over [power] poll_interval_ms.
class DaemonOptions : public ::testing::Test {
 protected:
  CliResult<DaemonSetup> parse(std::vector<const char*> args) {
    CommandLine cl;
    cl.name = "cgn-x";
    cl.description = "cgn-x: a test daemon";
    cl.config_help = "cognitora.toml ([power])";
    cl.listen_help = "HOST:PORT of the service";
    cl.listen_keys = [](config::CognitoraConfig& c) {
      return std::pair{&c.power.listen, &c.power.metrics_listen};
    };
    cl.add_flags = [this](CLI::App& app) { app.add_option("--widgets", widgets_, "how many widgets"); };
    cl.apply = [this](const CLI::App& app, config::CognitoraConfig& c) -> std::optional<std::string> {
      if (app.count("--widgets") == 0) {
        return std::nullopt;
      }
      if (widgets_ == 0) {
        return "--widgets 0 is no widgets";
      }
      c.power.poll_interval_ms = widgets_;
      return std::nullopt;
    };
    args.insert(args.begin(), "cgn-x");
    return parse_options(cl, static_cast<int>(args.size()), args.data());
  }

  cgn::testing::TempDir dir_;
  uint32_t widgets_ = 0;
};

TEST_F(DaemonOptions, HelpListsTheDaemonsFlagsBetweenTheCommonOnes) {
  auto s = parse({"--help"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, 0);
  const std::string& help = s.error().message;
  EXPECT_THAT(help, StartsWith("cgn-x: a test daemon"));
  const size_t metrics = help.find("--metrics-listen");
  const size_t widgets = help.find("--widgets");
  const size_t port_file = help.find("--port-file");
  ASSERT_NE(widgets, std::string::npos) << help;
  EXPECT_LT(metrics, widgets) << help;
  EXPECT_LT(widgets, port_file) << help;
  EXPECT_THAT(help, HasSubstr("HOST:PORT of the service"));
  EXPECT_THAT(help, HasSubstr("cognitora.toml ([power])"));
}

TEST_F(DaemonOptions, FlagsOverrideTheConfigAndPrintModePrintsTheResult) {
  const std::string cfg = dir_.file("c.toml");
  cgn::testing::write_file(cfg, "[power]\nlisten = \"127.0.0.1:1\"\npoll_interval_ms = 100\n");
  auto s = parse({"--config", cfg.c_str(), "--metrics-listen", "127.0.0.1:7", "--widgets", "42",
                  "--port-file", "p", "--metrics-port-file", "m", "--log-level", "debug", "--print-config"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->config.power.listen, "127.0.0.1:1");
  EXPECT_EQ(s->config.power.metrics_listen, "127.0.0.1:7");
  EXPECT_EQ(s->config.power.poll_interval_ms, 42u);
  EXPECT_EQ(s->config_path, cfg);
  EXPECT_EQ(s->port_file, "p");
  EXPECT_EQ(s->metrics_port_file, "m");
  EXPECT_EQ(s->log_level, "debug");
  auto printed = print_mode(*s);
  ASSERT_TRUE(printed.has_value());
  EXPECT_EQ(printed->code, 0);
  EXPECT_THAT(printed->message, HasSubstr("poll_interval_ms = 42"));
  s->print_config = false;
  EXPECT_FALSE(print_mode(*s).has_value());
}

TEST_F(DaemonOptions, ErrorsAreStatus2NamingTheFlagOrTheKey) {
  const std::string cfg = dir_.file("bad.toml");
  cgn::testing::write_file(cfg, "[power]\nno_such_key = 1\n");
  auto bad_config = parse({"--config", cfg.c_str()});
  ASSERT_FALSE(bad_config.ok());
  EXPECT_EQ(bad_config.error().code, 2);
  EXPECT_THAT(bad_config.error().message, StartsWith("cgn-x: " + cfg + ":2:"));
  EXPECT_THAT(bad_config.error().message, HasSubstr("power.no_such_key"));

  for (auto [args, why] :
       {std::pair{std::vector<const char*>{"--listen", "nohost"}, "--listen \"nohost\" is not HOST:PORT"},
        std::pair{std::vector<const char*>{"--metrics-listen", "x"},
                  "--metrics-listen \"x\" is not HOST:PORT"},
        std::pair{std::vector<const char*>{"--widgets", "0"}, "--widgets 0 is no widgets"},
        std::pair{std::vector<const char*>{"--log-level", "loud"}, "--log-level \"loud\" is not one of"}}) {
    auto s = parse(args);
    ASSERT_FALSE(s.ok()) << why;
    EXPECT_EQ(s.error().code, 2);
    EXPECT_THAT(s.error().message, StartsWith(std::string("cgn-x: ") + why));
  }

  auto usage = parse({"--no-such-flag"});
  ASSERT_FALSE(usage.ok());
  EXPECT_NE(usage.error().code, 0);
  EXPECT_THAT(usage.error().message, StartsWith("cgn-x: "));
  EXPECT_THAT(usage.error().message, HasSubstr("--no-such-flag"));
  EXPECT_THAT(usage.error().message, HasSubstr("--print-config"));  // the help follows
}

TEST(DaemonMetrics, ServesMetricsOnLoopbackAndNamesTheKeyOnFailure) {
  auto server = serve_metrics("cgn-x", "x", "127.0.0.1:0", [] { return std::string("cgn_up 1\n"); });
  ASSERT_TRUE(server.ok()) << server.error().message;
  ASSERT_GT((*server)->port(), 0);
  boost::asio::io_context ctx;
  http::HttpClient client(ctx);
  http::Request req{boost::beast::http::verb::get, "/metrics", 11};
  req.set(boost::beast::http::field::host, "127.0.0.1");
  auto r = cgn::testing::run_on(
      ctx, client.send(http::Upstream{"127.0.0.1", (*server)->port(), false}, std::move(req)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ(r->body(), "cgn_up 1\n");
  (*server)->stop(std::chrono::milliseconds(0));

  auto malformed = serve_metrics("cgn-x", "x", "nohost", [] { return std::string(); });
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.error().code, 2);
  EXPECT_EQ(malformed.error().message, "cgn-x: [x] metrics_listen \"nohost\" is not HOST:PORT\n");

  auto taken = serve_metrics("cgn-x", "x", "192.0.2.1:1", [] { return std::string(); });  // not ours
  ASSERT_FALSE(taken.ok());
  EXPECT_THAT(taken.error().message, StartsWith("cgn-x: [x] metrics_listen 192.0.2.1:1: "));
}

TEST(DaemonPortFiles, WritesTheSetOnesAndNamesTheFlagOnFailure) {
  cgn::testing::TempDir dir;
  DaemonSetup s;
  s.metrics_port_file = dir.file("m");
  ASSERT_TRUE(write_port_files("cgn-x", s, 1234, 5678).ok());
  EXPECT_EQ(cgn::testing::read_file(dir.file("m")), "5678\n");
  s.port_file = dir.file("no/such/dir/p");
  auto w = write_port_files("cgn-x", s, 1234, 5678);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, 2);
  EXPECT_THAT(w.error().message, StartsWith("cgn-x: --port-file: "));
}

TEST(DaemonShutdown, TimeLeftIsNeverNegative) {
  ManualClock clock;
  clock.advance(10 * kNanosPerSecond);
  EXPECT_EQ(time_left(clock, clock.now() + kShutdownGrace), std::chrono::milliseconds(5000));
  EXPECT_EQ(time_left(clock, clock.now() - kNanosPerSecond), std::chrono::milliseconds(0));
}

TEST(DaemonTls, ModeNamesTheTlsSetting) {
  config::TlsConfig tls;
  EXPECT_EQ(tls_mode(tls), "off");
  tls.cert_file = "c.pem";
  EXPECT_EQ(tls_mode(tls), "mtls");
  tls.require_client_cert = false;
  EXPECT_EQ(tls_mode(tls), "tls");
}

}  // namespace
}  // namespace cgn::daemon
