#include "kvcached/kvcached_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/process.h"

namespace cgn::kvcached {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class KvcachedOptions : public ::testing::Test {
 protected:
  // cgn-kvcached --config <a file with `toml`> ARGS...
  CliResult<KvcachedSetup> parse(const std::string& toml, std::vector<const char*> args) {
    const std::string cfg = dir_.file("cognitora.toml");
    cgn::testing::write_file(cfg, toml);
    args.insert(args.begin(), {"cgn-kvcached", "--config", cfg.c_str()});
    return parse_kvcached_options(static_cast<int>(args.size()), args.data());
  }

  cgn::testing::TempDir dir_;
};

TEST_F(KvcachedOptions, HelpIsStatus0WithTheFlags) {
  const char* argv[] = {"cgn-kvcached", "--help"};
  auto s = parse_kvcached_options(2, argv);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, 0);
  EXPECT_THAT(s.error().message, HasSubstr("--config"));
  EXPECT_THAT(s.error().message, HasSubstr("--print-config"));
  EXPECT_THAT(s.error().message, HasSubstr("--port-file"));
}

TEST_F(KvcachedOptions, AnUnknownFlagIsAUsageErrorWithTheHelp) {
  auto s = parse("", {"--no-such-flag"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().code, 0);
  EXPECT_THAT(s.error().message, StartsWith("cgn-kvcached: "));
  EXPECT_THAT(s.error().message, HasSubstr("--no-such-flag"));
  EXPECT_THAT(s.error().message, HasSubstr("--config"));
}

TEST_F(KvcachedOptions, BadValuesNameTheirFlagOrKey) {
  const std::vector<std::pair<std::vector<const char*>, std::string>> cases = {
      {{"--listen", "9400"}, "--listen \"9400\" is not HOST:PORT"},
      {{"--metrics-listen", "x"}, "--metrics-listen \"x\" is not HOST:PORT"},
      {{"--ram-bytes", "1000"}, "--ram-bytes 1000 is below 1 MiB"},
      {{"--ram-bytes", "2097152"}, "--ram-bytes 2097152 is below [kvcached] max_block_bytes"},
      {{"--log-level", "loud"}, "--log-level \"loud\" is not one of"},
  };
  for (const auto& [args, message] : cases) {
    auto s = parse("", args);
    ASSERT_FALSE(s.ok()) << args[0];
    EXPECT_EQ(s.error().code, 2) << args[0];
    EXPECT_THAT(s.error().message, HasSubstr(message));
    EXPECT_THAT(s.error().message, StartsWith("cgn-kvcached: "));
  }
  auto bad = parse("[kvcached]\nram_bytes = 5\n", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 2);
  EXPECT_THAT(bad.error().message, HasSubstr("kvcached.ram_bytes"));
}

TEST_F(KvcachedOptions, FlagsOverrideTheFileAndFillTheSetup) {
  auto s = parse("[kvcached]\nlisten = \"0.0.0.0:1\"\nssd_dir = \"/a\"\nmax_block_bytes = 1048576\n",
                 {"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--socket", "", "--ssd-dir",
                  "/b", "--ram-bytes", "8388608", "--port-file", "/tmp/p", "--metrics-port-file", "/tmp/m",
                  "--log-level", "debug", "--print-config"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  const auto& k = s->config.kvcached;
  EXPECT_EQ(k.listen, "127.0.0.1:0");
  EXPECT_EQ(k.metrics_listen, "127.0.0.1:0");
  EXPECT_EQ(k.socket, "");
  EXPECT_EQ(k.ssd_dir, "/b");
  EXPECT_EQ(k.ram_bytes, 8ull << 20);
  EXPECT_EQ(k.max_block_bytes, 1ull << 20);
  EXPECT_EQ(s->port_file, "/tmp/p");
  EXPECT_EQ(s->metrics_port_file, "/tmp/m");
  EXPECT_EQ(s->log_level, "debug");
  EXPECT_TRUE(s->print_config);
}

TEST_F(KvcachedOptions, PrintConfigShowsTheEffectiveConfigurationWithDefaults) {
  const char* argv[] = {"cgn-kvcached", "--ssd-dir", "/var/kv", "--print-config"};
  auto s = parse_kvcached_options(4, argv);
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto printed = kvcached_print_mode(*s);
  ASSERT_TRUE(printed.has_value());
  EXPECT_EQ(printed->code, 0);
  EXPECT_THAT(printed->message, HasSubstr("[kvcached]"));
  EXPECT_THAT(printed->message, HasSubstr("ssd_dir = '/var/kv'"));
  EXPECT_THAT(printed->message, HasSubstr("high_watermark = 0.9"));
  s->print_config = false;
  EXPECT_FALSE(kvcached_print_mode(*s).has_value());
}

TEST(KvcachedStoreConfig, MapsEveryKey) {
  config::KvcachedConfig k;
  k.ram_bytes = 64ull << 20;
  k.page_bytes = 8192;
  k.max_block_bytes = 4ull << 20;
  k.high_watermark = 0.75;
  k.spill_fraction = 0.1;
  k.max_lease_ms = 2500;
  k.ssd_dir = "/x";
  k.ssd_max_bytes = 1ull << 30;
  k.ssd_segment_bytes = 8ull << 20;
  k.ssd_ttl_s = 9;
  k.direct_io = "off";
  const kvcache::StoreConfig c = store_config(k);
  EXPECT_EQ(c.ram_bytes, 64ull << 20);
  EXPECT_EQ(c.page_bytes, 8192u);
  EXPECT_EQ(c.max_block_bytes, 4ull << 20);
  EXPECT_DOUBLE_EQ(c.high_watermark, 0.75);
  EXPECT_DOUBLE_EQ(c.spill_fraction, 0.1);
  EXPECT_EQ(c.max_lease, 2500 * kNanosPerMilli);
  EXPECT_TRUE(c.ssd_enabled);
  EXPECT_EQ(c.ssd.dir, "/x");
  EXPECT_EQ(c.ssd.max_bytes, 1ull << 30);
  EXPECT_EQ(c.ssd.segment_bytes, 8ull << 20);
  EXPECT_EQ(c.ssd.ttl, 9 * kNanosPerSecond);
  EXPECT_EQ(c.ssd.direct_io, kvcache::DirectIo::kOff);
  k.ssd_dir.clear();
  k.direct_io = "on";
  EXPECT_FALSE(store_config(k).ssd_enabled);
  EXPECT_EQ(store_config(k).ssd.direct_io, kvcache::DirectIo::kOn);
}

}  // namespace
}  // namespace cgn::kvcached
