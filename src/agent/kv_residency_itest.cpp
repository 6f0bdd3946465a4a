// KvResidency against a real cgn-kvcached on loopback: what the daemon holds of tracked chains
// reaches the sink with its tier, once per change, and what it lost goes as `gone`.
#include <gtest/gtest.h>

#include "agent/engine_digests.h"
#include "agent/kv_residency.h"
// GCC 12 at -O3 reports a false -Wrestrict inside the operator+ chain of Daemon's constructor
// once inlined here (GCC PR105329); the strings do not overlap.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "kvcached/kvcached_itest_util.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using kvcached::itest::Daemon;
using kvcached::itest::digest_of;

TEST(KvResidency, publishes_what_kvcached_holds_with_its_tier_and_withdraws_what_it_lost) {
  testing::TempDir dir;
  Daemon d(dir, "kv", "ram_bytes = 16777216\nmax_block_bytes = 1048576\n");
  ASSERT_TRUE(d.start());
  auto client = kvcached::KvClient::connect(d.target(), config::TlsConfig{});
  ASSERT_TRUE(client.ok()) << client.error().message;
  config::EngineConfig engine;
  engine.model = "m";
  const kvcache::BlockNamespace ns = engine_naming("vllm", engine, 256).ns;
  EXPECT_EQ(ns.block_tokens, 64u);  // routing digests as the engine's: one for one
  std::vector<Digest> chain;
  for (uint64_t i = 0; i < 5; ++i) {
    chain.push_back(digest_of(7, i));
  }
  const std::vector<uint8_t> bytes(4096, 0x5a);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*client)->put(ns, chain[i], bytes).ok());
  }
  std::vector<ResidencyChange> seen;
  KvResidencyOptions o;
  o.ns = ns;
  o.block_bytes = 256;
  KvResidency r(
      o,
      [&](const kvcache::BlockNamespace& n, const std::vector<std::vector<Digest>>& reqs, uint32_t lease) {
        return (*client)->batch_lookup(n, reqs, lease);
      },
      [&](const ResidencyChange& c) { seen.push_back(c); });
  r.track(std::span(chain).first(2), std::span(chain).first(2));
  r.track(chain, chain);  // extends the first: replaces it
  EXPECT_EQ(r.tracked_digests(), 5u);
  ASSERT_TRUE(r.refresh_once());
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_EQ(seen[0].resident.size(), 3u);
  for (const auto& [dg, tier] : seen[0].resident) {
    EXPECT_EQ(tier, routing::Tier::kRam);
  }
  EXPECT_EQ(r.resident_run(chain), std::vector<Digest>(chain.begin(), chain.begin() + 3));
  ASSERT_TRUE(r.refresh_once());
  EXPECT_EQ(seen.size(), 1u);  // nothing changed: nothing sent
  // The daemon restarts without an SSD tier: its RAM is gone, and so is the residency.
  d.kill9();
  EXPECT_FALSE(r.refresh_once());
  EXPECT_EQ(r.failures(), 1u);
  EXPECT_EQ(r.resident_run(chain).size(), 3u);  // the last answer stands meanwhile
  Daemon d2(dir, "kv2", "ram_bytes = 16777216\nmax_block_bytes = 1048576\n");
  ASSERT_TRUE(d2.start());
  auto client2 = kvcached::KvClient::connect(d2.target(), config::TlsConfig{});
  ASSERT_TRUE(client2.ok());
  client = std::move(client2);
  ASSERT_TRUE(r.refresh_once());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].gone.size(), 3u);
  EXPECT_TRUE(r.resident_run(chain).empty());
}

// kvcached answers at most 1,024 requests in one BatchLookup; an agent tracking more blocks (its
// default cap is 4,096 digests) asks in several and still sees every resident block.
TEST(KvResidency, more_tracked_blocks_than_one_batch_lookup_takes_are_looked_up_in_batches) {
  testing::TempDir dir;
  Daemon d(dir, "kv", "ram_bytes = 16777216\nmax_block_bytes = 1048576\n");
  ASSERT_TRUE(d.start());
  auto client = kvcached::KvClient::connect(d.target(), config::TlsConfig{});
  ASSERT_TRUE(client.ok()) << client.error().message;
  config::EngineConfig engine;
  engine.model = "m";
  const kvcache::BlockNamespace ns = engine_naming("vllm", engine, 256).ns;
  KvResidencyOptions o;
  o.ns = ns;
  o.block_bytes = 256;
  std::vector<ResidencyChange> seen;
  KvResidency r(
      o,
      [&](const kvcache::BlockNamespace& n, const std::vector<std::vector<Digest>>& reqs, uint32_t lease) {
        return (*client)->batch_lookup(n, reqs, lease);
      },
      [&](const ResidencyChange& c) { seen.push_back(c); });
  std::vector<std::vector<Digest>> chains;
  for (uint64_t c = 0; c < 5; ++c) {  // 5 x 300 = 1,500 blocks
    chains.emplace_back();
    for (uint64_t i = 0; i < 300; ++i) {
      chains.back().push_back(digest_of(100 + c, i));
    }
    r.track(chains.back(), chains.back());
  }
  ASSERT_EQ(r.tracked_digests(), 1500u);
  const std::vector<uint8_t> bytes(64, 0x5a);
  for (const auto& chain : {chains[0], chains[4]}) {  // the first and the last batch
    ASSERT_TRUE((*client)->put(ns, chain[7], bytes).ok());
  }
  ASSERT_TRUE(r.refresh_once()) << "failures: " << r.failures();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].resident.size(), 2u);
  EXPECT_EQ(r.resident_run(chains[4]), std::vector<Digest>{chains[4][7]});
}

}  // namespace
}  // namespace cgn::agent
