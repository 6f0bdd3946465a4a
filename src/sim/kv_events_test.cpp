// KV events in the simulator: what the block pool records, the msgpack bytes of an EventBatch
// (golden bytes written from the msgpack spec, not from the encoder), the config and the
// launch-line flags.
#include "sim/kv_events.h"

#include <gtest/gtest.h>

#include "sim/launch.h"
#include "testing/kv_event_golden.h"

namespace cgn::sim {
namespace {

using Kind = KvCacheEvent::Kind;

std::vector<TokenId> tokens(uint32_t salt, size_t n) {
  std::vector<TokenId> t(n);
  for (size_t i = 0; i < n; ++i) {
    t[i] = static_cast<TokenId>(salt * 1000 + i);
  }
  return t;
}

// A request over `toks`: allocate, register every full block chained, release.
void serve(BlockPool& pool, const std::vector<TokenId>& toks, uint32_t bs = 4) {
  std::vector<BlockHash> hashes;
  extend_block_hashes(toks, bs, hashes);
  std::vector<BlockId> ids;
  pool.acquire_cached_prefix(hashes, static_cast<uint32_t>(hashes.size()), ids);
  const size_t hit = ids.size();
  ASSERT_TRUE(pool.allocate(static_cast<uint32_t>(hashes.size() - hit), ids));
  for (size_t b = hit; b < hashes.size(); ++b) {
    pool.cache_block(ids[b], hashes[b], b == 0 ? nullptr : &hashes[b - 1],
                     std::span<const TokenId>(toks.data() + b * bs, bs), bs);
  }
  pool.release(ids);
}

TEST(KvCacheEvents, NothingIsRecordedUnlessAskedFor) {
  BlockPool pool(8);
  serve(pool, tokens(1, 8));
  std::vector<KvCacheEvent> evs;
  pool.take_events(evs);
  EXPECT_TRUE(evs.empty());
}

TEST(KvCacheEvents, StoredChainIsOneEventWithParentTokensAndBlockSize) {
  BlockPool pool(8);
  pool.set_record_events(true);
  const auto toks = tokens(1, 9);  // two full blocks of 4, one partial
  serve(pool, toks);
  std::vector<KvCacheEvent> evs;
  pool.take_events(evs);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, Kind::kStored);
  std::vector<BlockHash> want;
  extend_block_hashes(toks, 4, want);
  EXPECT_EQ(evs[0].hashes, want);
  EXPECT_FALSE(evs[0].has_parent);
  EXPECT_EQ(evs[0].tokens, std::vector<TokenId>(toks.begin(), toks.begin() + 8));
  EXPECT_EQ(evs[0].block_size, 4u);
  // A longer request sharing the first blocks stores only its new block, parented on the last hit.
  auto longer = toks;
  longer.resize(12);
  serve(pool, longer);
  evs.clear();
  pool.take_events(evs);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_TRUE(evs[0].has_parent);
  EXPECT_EQ(evs[0].parent, want[1]);
  EXPECT_EQ(evs[0].hashes.size(), 1u);
}

TEST(KvCacheEvents, LruReuseRecordsTheEvictedHashesAsRemoved) {
  BlockPool pool(4);
  pool.set_record_events(true);
  serve(pool, tokens(1, 16));  // fills the pool: 4 cached blocks, all free
  std::vector<KvCacheEvent> evs;
  pool.take_events(evs);
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.allocate(2, ids));  // reuses the two least recently freed (the chain's tail)
  evs.clear();
  pool.take_events(evs);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, Kind::kRemoved);
  EXPECT_EQ(evs[0].hashes.size(), 2u);
}

TEST(KvCacheEvents, EvictAllIsAllBlocksClearedOnlyWhenNothingCachedRemains) {
  BlockPool pool(8);
  pool.set_record_events(true);
  serve(pool, tokens(1, 8));
  std::vector<KvCacheEvent> evs;
  pool.take_events(evs);
  EXPECT_EQ(pool.evict_all(), 2u);
  evs.clear();
  pool.take_events(evs);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, Kind::kAllCleared);

  // A referenced cached block survives: then the removals are reported one by one instead.
  serve(pool, tokens(2, 8));
  std::vector<BlockHash> h2;
  extend_block_hashes(tokens(2, 8), 4, h2);
  std::vector<BlockId> held;
  pool.acquire_cached_prefix(std::span<const BlockHash>(h2.data(), 1), 1, held);
  evs.clear();
  pool.take_events(evs);
  EXPECT_EQ(pool.evict_all(), 1u);
  evs.clear();
  pool.take_events(evs);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, Kind::kRemoved);
  EXPECT_EQ(evs[0].hashes, std::vector<BlockHash>{h2[1]});
}

TEST(KvCacheEvents, EvictingOnePrefixRemovesItsHashes) {
  BlockPool pool(8);
  pool.set_record_events(true);
  serve(pool, tokens(1, 8));
  serve(pool, tokens(2, 8));
  std::vector<BlockHash> h1;
  extend_block_hashes(tokens(1, 8), 4, h1);
  std::vector<KvCacheEvent> evs;
  pool.take_events(evs);
  EXPECT_EQ(pool.evict_hashes(h1), 2u);
  evs.clear();
  pool.take_events(evs);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].kind, Kind::kRemoved);
  EXPECT_EQ(evs[0].hashes, h1);
}

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

TEST(KvEventEncoding, ArrayEncodingGoldenBytes) {
  KvCacheEvent stored{.kind = Kind::kStored};
  stored.hashes = {1, 0x1234};
  stored.has_parent = false;
  stored.tokens = {7, 8};
  stored.block_size = 1;
  KvCacheEvent removed{.kind = Kind::kRemoved};
  removed.hashes = {0xffffffffffffffffULL};
  KvCacheEvent cleared{.kind = Kind::kAllCleared};
  const std::vector<KvCacheEvent> evs = {stored, removed, cleared};
  // The golden batch the agent's decoder reads too.
  EXPECT_EQ(hex(encode_event_batch(1.5, evs, KvEventEncoding::kArray)), cgn::testing::kKvEventArrayBatchHex);
}

TEST(KvEventEncoding, MapEncodingGoldenBytes) {
  KvCacheEvent removed{.kind = Kind::kRemoved};
  removed.hashes = {5};
  KvCacheEvent cleared{.kind = Kind::kAllCleared};
  const std::vector<KvCacheEvent> evs = {removed, cleared};
  // 83 = fixmap(3): a4"type" ac"BlockRemoved" ac"block_hashes" 91 05 a6"medium" a3"GPU"
  // 81 = fixmap(1): a4"type" b0"AllBlocksCleared"
  const std::string want =
      "93cb0000000000000000"
      "92"
      "83a474797065ac426c6f636b52656d6f766564ac626c6f636b5f686173686573"
      "9105"
      "a66d656469756d"
      "a3475055"
      "81a474797065b0416c6c426c6f636b73436c6561726564"
      "00";
  EXPECT_EQ(hex(encode_event_batch(0.0, evs, KvEventEncoding::kMap)), want);
}

TEST(KvEventEncoding, SequenceNumbersAreEightBytesBigEndian) {
  EXPECT_EQ(hex(encode_seq(0)), "0000000000000000");
  EXPECT_EQ(hex(encode_seq(258)), "0000000000000102");
  EXPECT_EQ(hex(encode_seq(-1)), "ffffffffffffffff");  // END_SEQ of a replay
}

TEST(KvEventsConfig, VllmKeysAndTheBindRule) {
  auto c = parse_kv_events_config(
      R"({"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","topic":"kv-events",)"
      R"("replay_endpoint":"tcp://*:5558","buffer_steps":7,"max_queue_size":5})",
      false);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->endpoint, "tcp://*:5557");
  EXPECT_EQ(c->topic, "kv-events");
  EXPECT_EQ(c->replay_endpoint, "tcp://*:5558");
  EXPECT_EQ(c->buffer_steps, 7u);
  EXPECT_TRUE(kv_endpoint_binds("tcp://*:5557"));
  EXPECT_TRUE(kv_endpoint_binds("ipc:///tmp/x"));
  EXPECT_FALSE(kv_endpoint_binds("tcp://127.0.0.1:5557"));
  // vLLM needs the enable key; SGLang's flag alone enables.
  EXPECT_FALSE(parse_kv_events_config(R"({"publisher":"zmq"})", false)->enabled);
  EXPECT_TRUE(parse_kv_events_config(R"({"publisher":"zmq"})", true)->enabled);
  EXPECT_FALSE(
      parse_kv_events_config(R"({"enable_kv_cache_events":true,"publisher":"null"})", false)->enabled);
  for (const char* bad : {"[]", "{", R"({"enable_kv_cache_events":"yes"})", R"({"publisher":"kafka"})",
                          R"({"endpoint":5})", R"({"buffer_steps":-1})"}) {
    EXPECT_FALSE(parse_kv_events_config(bad, false).ok()) << bad;
  }
}

TEST(KvEventsConfig, LaunchLinesCarryTheConfigAndEncoding) {
  auto v = parse_launch_line(std::vector<std::string>{
      "vllm", "serve", "m", "--kv-events-config",
      R"({"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:6000"})",
      "--sim-kv-events-encoding", "map"});
  ASSERT_TRUE(v.ok()) << v.error().message;
  ASSERT_TRUE(v->kv_events.has_value());
  EXPECT_TRUE(v->kv_events->enabled);
  EXPECT_EQ(v->kv_events->endpoint, "tcp://*:6000");
  EXPECT_EQ(v->kv_events->encoding, KvEventEncoding::kMap);
  auto s = parse_launch_line(std::vector<std::string>{"python", "-m", "sglang.launch_server", "--model-path",
                                                      "m", "--kv-events-config", R"({"publisher":"zmq"})"});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->kv_events->enabled);
  EXPECT_FALSE(
      parse_launch_line(std::vector<std::string>{"vllm", "serve", "m", "--kv-events-config", "{"}).ok());
  EXPECT_FALSE(
      parse_launch_line(std::vector<std::string>{"vllm", "serve", "m", "--sim-kv-events-encoding", "cbor"})
          .ok());
}

}  // namespace
}  // namespace cgn::sim
