#include "kvcached/key_cache.h"

#include <gtest/gtest.h>

namespace cgn::kvcached {
namespace {

kvcache::BlockNamespace ns_of(uint32_t block_tokens) {
  kvcache::BlockNamespace ns;
  ns.model = "m";
  ns.dtype = "bf16";
  ns.block_tokens = block_tokens;
  return ns;
}

TEST(KeyCache, GivesTheDeriversKeysAndStaysBounded) {
  KeyCache cache;
  Digest d{};
  d[0] = 7;
  for (uint32_t i = 1; i <= 3 * KeyCache::kMaxNamespaces; ++i) {
    const auto expected = kvcache::KeyDeriver::create(ns_of(i)).value().key(d);
    EXPECT_EQ(cache.get(ns_of(i)).key(d), expected) << i;
    EXPECT_LE(cache.size(), KeyCache::kMaxNamespaces);
  }
  // A cached namespace answers the same as a fresh one.
  EXPECT_EQ(cache.get(ns_of(5)).key(d), cache.get(ns_of(5)).key(d));
  EXPECT_NE(cache.get(ns_of(5)).key(d), cache.get(ns_of(6)).key(d));
}

}  // namespace
}  // namespace cgn::kvcached
