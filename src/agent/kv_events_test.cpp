// The KV event decoder against golden bytes written from the msgpack spec and vLLM's field order
// (docs/design/engines.md), the withdrawal plan and rule, the drivers' flags, and the
// subscriber's sequence handling (driven through handle(), no sockets).
#include "agent/kv_events.h"

#include <gtest/gtest.h>

#include "agent/driver.h"
#include "agent/kv_event_subscriber.h"
#include "cluster/kv_publish_set.h"
#include "testing/kv_event_golden.h"

namespace cgn::agent {
namespace {

std::vector<uint8_t> unhex(std::string_view h) {
  std::vector<uint8_t> out;
  auto nib = [](char c) { return static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(nib(h[i]) << 4 | nib(h[i + 1])));
  }
  return out;
}

using cgn::testing::kKvEventArrayBatchHex;
using cluster::digests_for_engine_blocks;
using cluster::publish_capacity;
using cluster::PublishedSet;

TEST(KvEventDecoder, ArrayEncodingFromVllmsFieldOrder) {
  const auto bytes = unhex(kKvEventArrayBatchHex);
  auto b = decode_kv_event_batch(bytes);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_DOUBLE_EQ(b->ts, 1.5);
  ASSERT_EQ(b->events.size(), 3u);
  EXPECT_EQ(b->events[0].kind, KvEvent::Kind::kStored);
  EXPECT_EQ(b->events[0].block_hashes, (std::vector<uint64_t>{1, 0x1234}));
  EXPECT_FALSE(b->events[0].parent.has_value());
  EXPECT_EQ(b->events[0].num_tokens, 2u);
  EXPECT_EQ(b->events[0].block_size, 1u);
  EXPECT_EQ(b->events[1].kind, KvEvent::Kind::kRemoved);
  EXPECT_EQ(b->events[1].block_hashes, (std::vector<uint64_t>{0xffffffffffffffffULL}));
  EXPECT_EQ(b->events[2].kind, KvEvent::Kind::kAllCleared);
  EXPECT_EQ(b->dp_rank, 0);
}

TEST(KvEventDecoder, MapEncodingAndAMapBatch) {
  // {"ts": 2 (int), "events": [{"medium":"GPU","type":"BlockRemoved","block_hashes":[5, -1]},
  //  {"type":"BlockStored","block_hashes":[bin 9 bytes],"parent_block_hash":7,"token_ids":[],
  //   "block_size":16,"lora_name":nil}]}   (no data_parallel_rank)
  const std::string hexs = std::string("82") + "a27473" + "02" + "a66576656e7473" + "92" +
                           // map 1 (3 pairs), type after medium
                           "83" + "a66d656469756d" + "a3475055" + "a474797065" +
                           "ac426c6f636b52656d6f766564" + "ac626c6f636b5f686173686573" + "9205ff" +
                           // map 2 (6 pairs)
                           "86" + "a474797065" + "ab426c6f636b53746f726564" + "ac626c6f636b5f686173686573" +
                           "91" + "c409" + "010203040506070809" + "b1706172656e745f626c6f636b5f68617368" +
                           "07" + "a9746f6b656e5f696473" + "90" + "aa626c6f636b5f73697a65" + "10" +
                           "a96c6f72615f6e616d65" + "c0";
  auto b = decode_kv_event_batch(unhex(hexs));
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_DOUBLE_EQ(b->ts, 2.0);
  EXPECT_FALSE(b->dp_rank.has_value());
  ASSERT_EQ(b->events.size(), 2u);
  EXPECT_EQ(b->events[0].kind, KvEvent::Kind::kRemoved);
  EXPECT_EQ(b->events[0].block_hashes, (std::vector<uint64_t>{5, 0xffffffffffffffffULL}));
  EXPECT_EQ(b->events[1].kind, KvEvent::Kind::kStored);
  // Bytes hashes keep their low 64 bits, big-endian (vLLM's int form).
  EXPECT_EQ(b->events[1].block_hashes, (std::vector<uint64_t>{0x0203040506070809ULL}));
  EXPECT_EQ(b->events[1].parent, 7u);
  EXPECT_EQ(b->events[1].block_size, 16u);
}

TEST(KvEventDecoder, TwoElementBatchAndUnknownEventsAreSkippedNotRejected) {
  // [0, [["BlockStoredCPU", 1], ["AllBlocksCleared"], {"type":"Future","x":1}]]
  const std::string hexs = std::string("92") + "00" + "93" + "92ae426c6f636b53746f726564435055" + "01" +
                           "91b0416c6c426c6f636b73436c6561726564" + "82a474797065a6467574757265a17801";
  auto b = decode_kv_event_batch(unhex(hexs));
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->unknown_events, 2u);
  ASSERT_EQ(b->events.size(), 1u);
  EXPECT_EQ(b->events[0].kind, KvEvent::Kind::kAllCleared);
}

TEST(KvEventDecoder, GarbageIsAnErrorValue) {
  struct Case {
    const char* hex;
    KvDecodeError want;
  };
  const std::vector<Case> cases = {
      {"", KvDecodeError::kTruncated},
      {"c1", KvDecodeError::kTruncated},                                        // never-used byte
      {"93cb3ff8", KvDecodeError::kTruncated},                                  // float cut short
      {"01", KvDecodeError::kBadType},                                          // not a batch
      {"91cb0000000000000000", KvDecodeError::kBadShape},                       // no events
      {"92a178", KvDecodeError::kBadType},                                      // ts is a string
      {"9200dd7fffffff", KvDecodeError::kBadShape},                             // 2^31 events in 0 bytes
      {"92009191ab426c6f636b53746f726564", KvDecodeError::kBadShape},           // BlockStored without fields
      {"92009192ac426c6f636b52656d6f766564a3475055", KvDecodeError::kBadType},  // hashes a string
      {"9200918180", KvDecodeError::kBadType},                                  // map key not a string
      {"9200918100c0", KvDecodeError::kBadType},                                // same
      {"920091", KvDecodeError::kBadShape},                      // one event promised, no bytes
      {"92009000", KvDecodeError::kBadShape},                    // trailing byte
      {"92009181a474797065a3475055", KvDecodeError::kBadShape},  // unknown... see below
  };
  for (const auto& c : cases) {
    std::string h = c.hex;
    std::erase(h, ' ');
    auto b = decode_kv_event_batch(unhex(h));
    if (std::string_view(c.hex) == "92009181a474797065a3475055") {
      // {"type":"GPU"}: an unknown type, skipped (forward compatible), not an error.
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(b->unknown_events, 1u);
      continue;
    }
    ASSERT_FALSE(b.ok()) << c.hex;
    EXPECT_EQ(to_string(b.error().code), to_string(c.want)) << c.hex << ": " << b.error().message;
  }
  // Deep nesting in an unknown (skipped) field is walked without recursion:
  // [0, [{"type":"AllBlocksCleared","x":[[[...nil...]]]}]]
  std::vector<uint8_t> bytes = unhex("92009182a474797065b0416c6c426c6f636b73436c6561726564a178");
  for (int i = 0; i < 100000; ++i) {
    bytes.push_back(0x91);
  }
  bytes.push_back(0xc0);
  auto b = decode_kv_event_batch(bytes);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->events.size(), 1u);
  bytes.pop_back();  // the innermost value missing
  EXPECT_FALSE(decode_kv_event_batch(bytes).ok());
}

TEST(KvEventDecoder, SequenceFrameIsEightBytesBigEndian) {
  EXPECT_EQ(decode_kv_event_seq(unhex("0000000000000102")), 258);
  EXPECT_EQ(decode_kv_event_seq(unhex("ffffffffffffffff")), -1);
  EXPECT_FALSE(decode_kv_event_seq(unhex("0102")).has_value());
}

KvEvent ev(KvEvent::Kind k, size_t hashes, uint32_t bs = 0) {
  KvEvent e;
  e.kind = k;
  e.block_hashes.assign(hashes, 1);
  e.block_size = bs;
  return e;
}

TEST(KvWithdrawalPlan, ClearWithdrawsAllAndOnlyLaterRemovalsCount) {
  KvEventBatch b;
  b.events = {ev(KvEvent::Kind::kRemoved, 3), ev(KvEvent::Kind::kStored, 2, 16),
              ev(KvEvent::Kind::kAllCleared, 0), ev(KvEvent::Kind::kRemoved, 2)};
  const auto w = plan_withdrawal(b);
  EXPECT_TRUE(w.all);
  EXPECT_EQ(w.removed_blocks, 2u);
  EXPECT_EQ(w.block_size, 16u);
  KvEventBatch stored_only;
  stored_only.events = {ev(KvEvent::Kind::kStored, 4, 16)};
  EXPECT_TRUE(plan_withdrawal(stored_only).empty());
}

TEST(KvWithdrawalRule, EngineBlocksConvertToDigestsByTheCapacityRule) {
  // 16-token blocks at 4 bytes a token = 64 bytes; 256-byte digest blocks: 4 engine blocks each.
  EXPECT_EQ(digests_for_engine_blocks(0, 16, 256), 0u);
  EXPECT_EQ(digests_for_engine_blocks(1, 16, 256), 1u);  // rounded up: never under-withdraw
  EXPECT_EQ(digests_for_engine_blocks(4, 16, 256), 1u);
  EXPECT_EQ(digests_for_engine_blocks(5, 16, 256), 2u);
  EXPECT_EQ(digests_for_engine_blocks(40, 16, 256), 10u);
  EXPECT_EQ(digests_for_engine_blocks(3, 128, 256), 6u);  // big engine blocks: 2 digests each
  EXPECT_EQ(digests_for_engine_blocks(7, 0, 256), 7u);    // unknown block size: one per block
  EXPECT_EQ(digests_for_engine_blocks(~uint64_t{0}, 1u << 20, 1), uint64_t{1} << 54);  // no overflow
  // Consistent with publish_capacity: the whole pool's blocks are the whole capacity.
  EXPECT_EQ(digests_for_engine_blocks(1000, 16, 256), publish_capacity(1000, 16, 256, 1'000'000));
}

TEST(KvWithdrawalRule, OldestDigestsGoFirstDeepestFirstWithinAChain) {
  auto d = [](uint8_t i) {
    Digest x{};
    x[0] = i;
    return x;
  };
  PublishedSet set(100);
  const std::vector<Digest> old_chain = {d(1), d(2), d(3)};
  const std::vector<Digest> new_chain = {d(10), d(11)};
  set.touch(old_chain);
  set.touch(new_chain);
  (void)set.take_changes();
  // 8 engine blocks of 16 tokens = 2 digests: the old chain's tail (3, then 2).
  EXPECT_EQ(set.prune_oldest(digests_for_engine_blocks(8, 16, 256)), 2u);
  EXPECT_TRUE(set.contains(d(1)));
  EXPECT_FALSE(set.contains(d(2)));
  EXPECT_FALSE(set.contains(d(3)));
  EXPECT_TRUE(set.contains(d(10)));
  const auto c = set.take_changes();
  EXPECT_EQ(c.deletes.size(), 2u);
}

TEST(KvEventsDrivers, EnginesThatPublishGetTheFlagOthersAreRefused) {
  config::EngineConfig e;
  e.model = "m";
  e.port = 8000;
  LaunchOptions o;
  o.kv_events = true;
  o.kv_events_port = 6001;
  const auto& reg = builtin_drivers();
  auto vllm = (*reg.find("vllm"))->launch_command(e, o);
  ASSERT_TRUE(vllm.ok());
  const std::vector<std::string> want_vllm = {
      "--kv-events-config",
      R"({"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:6001","topic":"kv-events"})"};
  EXPECT_EQ(std::vector<std::string>(vllm->argv.end() - 2, vllm->argv.end()), want_vllm);
  auto sglang = (*reg.find("sglang"))->launch_command(e, o);
  ASSERT_TRUE(sglang.ok());
  EXPECT_EQ(sglang->argv.back(),
            R"({"publisher":"zmq","endpoint":"tcp://127.0.0.1:6001","topic":"kv-events"})");
  auto sim = (*reg.find("sim"))->launch_command(e, o);
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(std::vector<std::string>(sim->argv.end() - 2, sim->argv.end()), want_vllm);
  // Off: no flag.
  o.kv_events = false;
  auto plain = (*reg.find("vllm"))->launch_command(e, o);
  EXPECT_EQ(std::find(plain->argv.begin(), plain->argv.end(), "--kv-events-config"), plain->argv.end());
  EXPECT_FALSE(kv_events_subscription(**reg.find("vllm"), o)->has_value());
  // On: the agent subscribes to the engine host; llama.cpp cannot publish.
  o.kv_events = true;
  auto sub = kv_events_subscription(**reg.find("vllm"), o);
  ASSERT_TRUE(sub.ok() && sub->has_value());
  EXPECT_EQ((*sub)->endpoint, "tcp://127.0.0.1:6001");
  EXPECT_TRUE((*sub)->bind);  // the engine dials the agent: nothing of the engine listens
  EXPECT_EQ((*sub)->topic, "kv-events");
  // An external engine binds its own publisher: the agent dials it where it runs.
  o.engine_host = "10.0.0.9";
  auto ext = kv_events_subscription(**reg.find("external"), o);
  ASSERT_TRUE(ext.ok() && ext->has_value());
  EXPECT_EQ((*ext)->endpoint, "tcp://10.0.0.9:6001");
  EXPECT_FALSE((*ext)->bind);
  auto llama = kv_events_subscription(**reg.find("llamacpp"), o);
  ASSERT_FALSE(llama.ok());
  EXPECT_EQ(llama.error().code, DriverError::kUnsupported);
}

std::vector<std::string> message(int64_t seq, std::string_view payload_hex) {
  std::string seqb(8, '\0');
  for (int i = 7; i >= 0; --i) {
    seqb[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(seq) >> (8 * (7 - i)) & 0xff);
  }
  const auto p = unhex(payload_hex);
  return {"kv-events", seqb, std::string(p.begin(), p.end())};
}

// [0, [["BlockRemoved",[1,2,3],"GPU"]], 0]
constexpr std::string_view kRemoved3 =
    "930091"
    "93ac426c6f636b52656d6f766564"
    "93010203"
    "a3475055"
    "00";

TEST(KvEventSubscriber, SequenceGapsAndBadMessagesWithdrawEverything) {
  std::vector<cluster::KvWithdrawal> got;
  KvEventSubscriber sub({"tcp://127.0.0.1:1", ""}, [&](const cluster::KvWithdrawal& w) { got.push_back(w); });
  sub.handle(message(10, kRemoved3));  // the first seen: no gap
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].all);
  EXPECT_EQ(got[0].removed_blocks, 3u);
  sub.handle(message(11, kRemoved3));
  EXPECT_FALSE(got.back().all);
  sub.handle(message(14, kRemoved3));  // 12 and 13 lost
  EXPECT_TRUE(got.back().all);
  sub.handle(message(0, kRemoved3));  // the engine restarted
  EXPECT_TRUE(got.back().all);
  const size_t before = got.size();
  sub.handle(message(1, "c1"));  // undecodable: its content is unknown
  ASSERT_EQ(got.size(), before + 1);
  EXPECT_TRUE(got.back().all);
  sub.handle(std::vector<std::string>{"only-one-frame"});  // rejected, nothing to withdraw
  EXPECT_EQ(got.size(), before + 1);
  const auto s = sub.stats();
  EXPECT_EQ(s.batches, 4u);
  EXPECT_EQ(s.removed_blocks, 12u);
  EXPECT_EQ(s.seq_gaps, 2u);
  EXPECT_EQ(s.lost_batches, 2u);
  EXPECT_EQ(s.decode_errors, 2u);
}

}  // namespace
}  // namespace cgn::agent
