// The real cgn-power binary against every fake at once (a dcgm-exporter page on loopback, a fake
// powercap tree, the fake libnvidia-ml.so.1, a fake ipmitool, a static draw): its gRPC Read and its
// /metrics against the fakes' ground truth, and its command line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>

#include "power/fake_http.h"
#include "power/http_fetch.h"
#include "power/power_grpc.h"
#include "testing/metrics_page.h"
#include "testing/process.h"

namespace cgn::power {
namespace {

namespace fs = std::filesystem;
using cgn::testing::metric;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::write_file;

std::string dcgm_page(uint64_t mj, double w) {
  return fmt::format(
      "DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"GPU-dcgm\"}} {}\n"
      "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"0\",UUID=\"GPU-dcgm\"}} {}\n",
      w, mj);
}

struct Fakes {
  TempDir dir;
  testing::FakeHttp exporter;
  Fakes() {
    exporter.serve("/metrics", dcgm_page(10'000, 300));
    fs::create_directories(dir.file("powercap/intel-rapl:0"));
    write_file(dir.file("powercap/intel-rapl:0/name"), "package-0\n");
    write_file(dir.file("powercap/intel-rapl:0/max_energy_range_uj"), "1000000\n");
    rapl(999'000);
    nvml(5'000);
    fs::create_directories(dir.file("ipmi"));
    fs::copy_file(cgn::testing::source_path("src/power/testdata/fake_ipmitool"), dir.file("ipmi/ipmitool"));
    fs::permissions(dir.file("ipmi/ipmitool"), fs::perms::owner_all);
    write_file(dir.file("ipmi/watts"), "640");
  }
  void rapl(uint64_t uj) const {
    write_file(dir.file("powercap/intel-rapl:0/energy_uj"), std::to_string(uj) + "\n");
  }
  void nvml(uint64_t mj) const {
    write_file(dir.file("nvml"),
               fmt::format("GPU-nvml 250000 {} 700000 85899345920 NVIDIA H100 80GB HBM3\n", mj));
  }
  std::string config() const {
    std::string text =
        fmt::format(R"([power]
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
poll_interval_ms = 50

[[power.sources]]
name = "gpus"
kind = "dcgm_exporter"
url = "{}"

[[power.sources]]
kind = "nvml"
path = "{}"

[[power.sources]]
name = "cpu"
kind = "rapl"
path = "{}"

[[power.sources]]
name = "bmc"
kind = "ipmi"
path = "{}"

[[power.sources]]
name = "fans"
kind = "static"
watts = 45.5

[[power.sources]]
name = "amd"
kind = "nvml"
path = "/nonexistent/libnvidia-ml.so.1"
)",
                    exporter.url("/metrics"), CGN_FAKE_NVML, dir.file("powercap"), dir.file("ipmi/ipmitool"));
    write_file(dir.file("cognitora.toml"), text);
    return dir.file("cognitora.toml");
  }
};

const DeviceReading* find(const Snapshot& s, const std::string& source, const std::string& device) {
  for (const auto& d : s.devices) {
    if (d.latest.source == source && d.latest.device == device) {
      return &d;
    }
  }
  return nullptr;
}

std::string scrape(uint16_t port) {
  BlockingHttp http(std::chrono::milliseconds(5000));
  auto got =
      http.send(http::Upstream{"127.0.0.1", port, false}, http::Request{http::Verb::get, "/metrics", 11});
  return got.ok() ? got.value().body() : std::string();
}

TEST(CgnPower, serves_every_source_over_grpc_and_metrics_with_exact_counter_energy) {
  Fakes f;
  std::string cfg = f.config();
  Process p({cgn::testing::bin_path("cgn-power"), "--config", cfg, "--port-file", f.dir.file("port"),
             "--metrics-port-file", f.dir.file("mport")},
            {{"CGN_FAKE_NVML_FILE", f.dir.file("nvml")}});
  int port = cgn::testing::wait_for_port_file(f.dir.file("port"), p, std::chrono::seconds(30));
  int mport = cgn::testing::wait_for_port_file(f.dir.file("mport"), p, std::chrono::seconds(30));
  ASSERT_GT(port, 0) << p.describe() << "\n" << p.log();
  auto client = PowerClient::connect("127.0.0.1:" + std::to_string(port), config::TlsConfig{});
  ASSERT_TRUE(client.ok());
  auto read = [&] {
    auto r = client.value()->read(std::chrono::seconds(5));
    return r.ok() ? r.value() : Snapshot{};
  };
  // Wait for a first reading of everything, then move every counter.
  ASSERT_TRUE(cgn::testing::wait_until([&] { return read().devices.size() == 5; }, std::chrono::seconds(30)))
      << p.log();
  f.exporter.serve("/metrics", dcgm_page(10'000 + 4'321, 310));
  f.rapl(2'500);  // wrapped at 1000000: 1000 + 2500 µJ
  f.nvml(5'000 + 777);
  auto moved = [&] {
    Snapshot s = read();
    const DeviceReading* g = find(s, "gpus", "GPU-dcgm");
    const DeviceReading* c = find(s, "cpu", "intel-rapl:0");
    const DeviceReading* n = find(s, "nvml", "GPU-nvml");
    return g && c && n && g->energy_uj == 4'321'000 && c->energy_uj == 3'500 && n->energy_uj == 777'000;
  };
  ASSERT_TRUE(cgn::testing::wait_until(moved, std::chrono::seconds(30))) << p.log();
  Snapshot s = read();
  EXPECT_EQ(find(s, "bmc", "chassis")->latest.watts, 640.0);
  EXPECT_EQ(find(s, "fans", "node")->latest.watts, 45.5);
  EXPECT_EQ(find(s, "nvml", "GPU-nvml")->latest.gpu->name, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(s.sources.size(), 6u);
  EXPECT_FALSE(s.sources[5].up);  // "amd": no library

  std::string page = scrape(static_cast<uint16_t>(mport));
  EXPECT_EQ(metric(page, "cgn_power_watts{source=\"gpus\",device=\"GPU-dcgm\"}"), 310.0) << page;
  EXPECT_EQ(metric(page, "cgn_power_energy_joules_total{source=\"gpus\",device=\"GPU-dcgm\"}"), 4.321)
      << page;
  EXPECT_EQ(metric(page, "cgn_power_limit_watts{source=\"nvml\",device=\"GPU-nvml\"}"), 700.0) << page;
  EXPECT_EQ(metric(page, "cgn_power_source_up{source=\"amd\",kind=\"nvml\"}"), 0.0) << page;
  EXPECT_EQ(metric(page, "cgn_power_source_up{source=\"cpu\",kind=\"rapl\"}"), 1.0) << page;
  EXPECT_GE(metric(page, "cgn_power_source_errors_total{source=\"amd\",kind=\"nvml\"}"), 1.0) << page;
  // Unknown is absent, never 0 W.
  EXPECT_EQ(page.find("source=\"amd\",device="), std::string::npos) << page;
  // The failing source is named once in the log, not once per poll.
  std::string log = p.log();
  size_t first = log.find("source=amd");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("source=amd", first + 1), std::string::npos) << log;
  EXPECT_EQ(p.stop(), 0);
}

// An agent's client left idle while cgn-power restarts on the same port: its next read is
// answered by the new daemon, not failed on the connection the old one closed.
TEST(CgnPower, the_first_read_after_a_restart_is_answered_by_the_new_daemon) {
  Fakes f;
  std::string cfg = cgn::testing::read_file(f.config());
  const std::string port = std::to_string(cgn::testing::free_port());
  const std::string wildcard = R"(listen = "127.0.0.1:0")";
  cfg.replace(cfg.find(wildcard), wildcard.size(), R"(listen = "127.0.0.1:)" + port + "\"");
  const std::string path = f.dir.file("fixed.toml");
  cgn::testing::write_file(path, cfg);
  const auto start = [&] {
    ::unlink(f.dir.file("port").c_str());
    auto p = std::make_unique<Process>(
        std::vector<std::string>{cgn::testing::bin_path("cgn-power"), "--config", path, "--port-file",
                                 f.dir.file("port")},
        std::map<std::string, std::string>{{"CGN_FAKE_NVML_FILE", f.dir.file("nvml")}});
    EXPECT_EQ(cgn::testing::wait_for_port_file(f.dir.file("port"), *p, std::chrono::seconds(30)),
              std::stoi(port))
        << p->log();
    return p;
  };
  auto p = start();
  auto client = PowerClient::connect("127.0.0.1:" + port, config::TlsConfig{});
  ASSERT_TRUE(client.ok());
  for (int restart = 0; restart < 3; ++restart) {
    auto before = client.value()->read(std::chrono::seconds(5));
    ASSERT_TRUE(before.ok()) << before.error().message;
    ASSERT_EQ(p->stop(), 0) << p->log();
    p = start();
    auto after = client.value()->read(std::chrono::seconds(5));
    EXPECT_TRUE(after.ok()) << "restart " << restart << ": " << after.error().message;
  }
  EXPECT_EQ(p->stop(), 0);
}

TEST(CgnPower, help_print_config_and_a_bad_config_exit_as_the_other_daemons_do) {
  TempDir dir;
  Process help({cgn::testing::bin_path("cgn-power"), "--help"}, {}, dir.file("help.log"));
  EXPECT_EQ(help.wait(std::chrono::seconds(30)), 0);
  EXPECT_NE(help.log().find("--poll-interval-ms"), std::string::npos) << help.log();

  write_file(dir.file("ok.toml"), "[[power.sources]]\nkind = \"static\"\nwatts = 10\n");
  Process print({cgn::testing::bin_path("cgn-power"), "--config", dir.file("ok.toml"), "--print-config"}, {},
                dir.file("print.log"));
  EXPECT_EQ(print.wait(std::chrono::seconds(30)), 0);
  EXPECT_NE(print.log().find("[[power.sources]]"), std::string::npos) << print.log();

  write_file(dir.file("bad.toml"), "[[power.sources]]\nkind = \"dcgm_exporter\"\n");
  Process bad({cgn::testing::bin_path("cgn-power"), "--config", dir.file("bad.toml")}, {},
              dir.file("bad.log"));
  EXPECT_EQ(bad.wait(std::chrono::seconds(30)), 2);
  EXPECT_NE(bad.log().find("bad.toml:"), std::string::npos) << bad.log();
  EXPECT_NE(bad.log().find("url"), std::string::npos) << bad.log();
}

}  // namespace
}  // namespace cgn::power
