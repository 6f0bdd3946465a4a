// [kvcached] keys: defaults, every key read, range and cross-key errors naming file, line and key,
// unknown keys rejected, and the dump reading back.
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

TEST(ConfigKvcached, DefaultsWithoutTheSection) {
  auto r = load("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const KvcachedConfig& k = r->kvcached;
  EXPECT_EQ(k.listen, "127.0.0.1:9400");
  EXPECT_EQ(k.metrics_listen, "127.0.0.1:9401");
  EXPECT_EQ(k.socket, "/run/cognitora/kvcached.sock");
  EXPECT_EQ(k.ram_bytes, 1ull << 30);
  EXPECT_EQ(k.page_bytes, 4096u);
  EXPECT_DOUBLE_EQ(k.high_watermark, 0.90);
  EXPECT_TRUE(k.ssd_dir.empty());
  EXPECT_EQ(k.direct_io, "auto");
}

TEST(ConfigKvcached, ReadsEveryKey) {
  auto r = load(R"([kvcached]
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
socket = ""
ram_bytes = 67108864
page_bytes = 8192
max_block_bytes = 16777216
high_watermark = 0.8
spill_fraction = 0.25
max_lease_ms = 5000
ssd_dir = "/var/lib/cognitora/kv"
ssd_max_bytes = 1073741824
ssd_segment_bytes = 4194304
ssd_ttl_s = 3600
direct_io = "off"
max_connections = 8
max_handles_per_connection = 16
)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const KvcachedConfig& k = r->kvcached;
  EXPECT_EQ(k.listen, "127.0.0.1:0");
  EXPECT_EQ(k.metrics_listen, "127.0.0.1:0");
  EXPECT_EQ(k.socket, "");
  EXPECT_EQ(k.ram_bytes, 64ull << 20);
  EXPECT_EQ(k.page_bytes, 8192u);
  EXPECT_EQ(k.max_block_bytes, 16ull << 20);
  EXPECT_DOUBLE_EQ(k.high_watermark, 0.8);
  EXPECT_DOUBLE_EQ(k.spill_fraction, 0.25);
  EXPECT_EQ(k.max_lease_ms, 5000u);
  EXPECT_EQ(k.ssd_dir, "/var/lib/cognitora/kv");
  EXPECT_EQ(k.ssd_max_bytes, 1ull << 30);
  EXPECT_EQ(k.ssd_segment_bytes, 4ull << 20);
  EXPECT_EQ(k.ssd_ttl_s, 3600u);
  EXPECT_EQ(k.direct_io, "off");
  EXPECT_EQ(k.max_connections, 8u);
  EXPECT_EQ(k.max_handles_per_connection, 16u);
  // The dump reads back to the same configuration.
  auto again = load(dump_config(*r));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->kvcached, k);
}

TEST(ConfigKvcached, ErrorsNameFileLineAndKey) {
  EXPECT_THAT(error_of("[kvcached]\npage_bytes = 6144\n"),
              AllOf(HasSubstr("cognitora.toml:2"), HasSubstr("kvcached.page_bytes"),
                    HasSubstr("not a power of two")));
  EXPECT_THAT(error_of("[kvcached]\nhigh_watermark = 1.5\n"), HasSubstr("kvcached.high_watermark"));
  EXPECT_THAT(error_of("[kvcached]\nram_bytes = 1024\n"), HasSubstr("kvcached.ram_bytes"));
  EXPECT_THAT(error_of("[kvcached]\ndirect_io = \"maybe\"\n"), HasSubstr("kvcached.direct_io"));
  EXPECT_THAT(error_of("[kvcached]\nlisten = \"nowhere\"\n"), HasSubstr("kvcached.listen"));
  EXPECT_THAT(error_of("[kvcached]\nram_bytes = 16777216\nmax_block_bytes = 33554432\n"),
              AllOf(HasSubstr("kvcached.max_block_bytes"), HasSubstr("above ram_bytes")));
  EXPECT_THAT(error_of("[kvcached]\nssd_ttl_s = 10\n"),
              AllOf(HasSubstr("kvcached.ssd_ttl_s"), HasSubstr("ssd_dir is not")));
}

TEST(ConfigKvcached, UnknownKeysAreRejected) {
  EXPECT_THAT(error_of("[kvcached]\nram_byte = 1048576\n"), HasSubstr("kvcached.ram_byte"));
}

}  // namespace
}  // namespace cgn::config
