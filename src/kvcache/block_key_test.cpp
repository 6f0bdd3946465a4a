#include "kvcache/block_key.h"

#include <gtest/gtest.h>

#include "core/digest.h"
#include "kvcache/crc32c.h"

namespace cgn::kvcache {
namespace {

BlockNamespace sample_ns() {
  return BlockNamespace{.model = "meta-llama/Llama-3.1-8B",
                        .dtype = "bf16",
                        .tp_rank = 0,
                        .tp_size = 2,
                        .block_tokens = 16,
                        .tenant = ""};
}

TEST(BlockKey, EveryNamespaceFieldChangesTheKey) {
  const Digest prefix = blake3_hash("the prefix");
  auto base = KeyDeriver::create(sample_ns());
  ASSERT_TRUE(base);
  const BlockKey k0 = base->key(prefix);
  std::vector<BlockNamespace> variants(6, sample_ns());
  variants[0].model = "other";
  variants[1].dtype = "fp8_e4m3";
  variants[2].tp_rank = 1;
  variants[3].tp_size = 4;
  variants[4].block_tokens = 32;
  variants[5].tenant = "team-a";
  for (const auto& ns : variants) {
    auto d = KeyDeriver::create(ns);
    ASSERT_TRUE(d);
    EXPECT_NE(d->key(prefix), k0);
  }
  EXPECT_NE(base->key(blake3_hash("another prefix")), k0);
}

TEST(BlockKey, SameFieldsGiveTheSameKeyAcrossDerivers) {
  const Digest prefix = blake3_hash("p");
  auto a = KeyDeriver::create(sample_ns());
  auto b = KeyDeriver::create(sample_ns());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->key(prefix), b->key(prefix));
  // The construction as documented: derive_key over the TLV material, then keyed BLAKE3.
  const Digest seed = blake3_derive_key("cognitora kvcache block key v1", namespace_material(sample_ns()));
  EXPECT_EQ(a->seed(), seed);
  EXPECT_EQ(
      a->key(prefix),
      blake3_keyed_hash(seed, std::string_view(reinterpret_cast<const char*>(prefix.data()), prefix.size())));
}

TEST(BlockKey, InvalidNamespacesNameTheField) {
  auto ns = sample_ns();
  ns.model.clear();
  auto r = KeyDeriver::create(ns);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("model"), std::string::npos);
  ns = sample_ns();
  ns.tp_rank = 2;
  r = KeyDeriver::create(ns);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("tp_rank"), std::string::npos);
  ns = sample_ns();
  ns.block_tokens = 0;
  EXPECT_FALSE(KeyDeriver::create(ns));
  ns = sample_ns();
  ns.tenant = std::string(kMaxNamespaceField + 1, 't');
  r = KeyDeriver::create(ns);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("tenant"), std::string::npos);
}

TEST(Crc32c, KnownVectorsAndIncremental) {
  const std::string s = "123456789";
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  EXPECT_EQ(crc32c(bytes), 0xE3069283u);
  EXPECT_EQ(crc32c(bytes.subspan(4), crc32c(bytes.first(4))), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  std::vector<uint8_t> ones(32, 0xff);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
}

}  // namespace
}  // namespace cgn::kvcache
