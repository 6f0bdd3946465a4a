// The KvCache request decoding: valid requests become typed structs; every invalid one is refused
// with a message naming the field.
#include "kvcached/wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cognitora/v1/kvcached.pb.h"

namespace cgn::kvcached {
namespace {

using ::testing::HasSubstr;
namespace pb = cognitora::v1;

void fill_ns(pb::BlockNamespace& ns) {
  ns.set_model("llama");
  ns.set_dtype("bf16");
  ns.set_tp_rank(1);
  ns.set_tp_size(2);
  ns.set_block_tokens(16);
  ns.set_tenant("t");
}

TEST(KvWire, PutHeaderDecodes) {
  pb::PutBlockRequest m;
  fill_ns(*m.mutable_namespace_());
  m.set_digest(std::string(32, '\x07'));
  m.set_length(100);
  m.set_data(std::string(40, 'a'));
  auto h = decode_put_header(m, 1000);
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->ns.model, "llama");
  EXPECT_EQ(h->ns.tp_rank, 1u);
  EXPECT_EQ(h->ns.tenant, "t");
  EXPECT_EQ(h->digest[31], 7);
  EXPECT_EQ(h->length, 100u);
}

TEST(KvWire, BadPutHeadersNameTheField) {
  pb::PutBlockRequest m;
  fill_ns(*m.mutable_namespace_());
  m.set_digest(std::string(32, 'x'));
  m.set_length(100);
  auto with = [&](auto edit) {
    pb::PutBlockRequest c = m;
    edit(c);
    auto r = decode_put_header(c, 1000);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_THAT(with([](auto& c) { c.clear_namespace_(); }), HasSubstr("namespace"));
  EXPECT_THAT(with([](auto& c) { c.mutable_namespace_()->set_model(""); }), HasSubstr("model"));
  EXPECT_THAT(with([](auto& c) { c.mutable_namespace_()->set_tp_rank(5); }), HasSubstr("tp_rank"));
  EXPECT_THAT(with([](auto& c) { c.set_digest("short"); }), HasSubstr("digest must be 32 bytes, got 5"));
  EXPECT_THAT(with([](auto& c) { c.set_length(0); }), HasSubstr("length must be > 0"));
  EXPECT_THAT(with([](auto& c) { c.set_length(1001); }), HasSubstr("above max_block_bytes (1000)"));
  EXPECT_THAT(with([](auto& c) { c.set_data(std::string(101, 'a')); }), HasSubstr("101 data bytes"));
}

TEST(KvWire, ContinuationsCarryDataOnly) {
  pb::PutBlockRequest m;
  m.set_data("abc");
  EXPECT_TRUE(check_put_continuation(m).ok());
  m.set_length(3);
  EXPECT_THAT(check_put_continuation(m).error().message, HasSubstr("only the first"));
}

TEST(KvWire, GetDecodes) {
  pb::GetBlockRequest m;
  fill_ns(*m.mutable_namespace_());
  m.set_digest(std::string(32, '\x01'));
  ASSERT_TRUE(decode_get(m).ok());
  m.set_digest(std::string(33, '\x01'));
  EXPECT_THAT(decode_get(m).error().message, HasSubstr("digest must be 32 bytes, got 33"));
}

TEST(KvWire, LookupIsBounded) {
  pb::BatchLookupRequest m;
  fill_ns(*m.mutable_namespace_());
  m.set_lease_ms(5000);
  auto* e = m.add_requests();
  e->add_digests(std::string(32, 'a'));
  e->add_digests(std::string(32, 'b'));
  m.add_requests();
  auto r = decode_lookup(m);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->requests.size(), 2u);
  EXPECT_EQ(r->requests[0].size(), 2u);
  EXPECT_EQ(r->requests[1].size(), 0u);
  EXPECT_EQ(r->lease_ms, 5000u);

  e->add_digests("x");
  EXPECT_THAT(decode_lookup(m).error().message, HasSubstr("requests[0].digests[2] must be 32 bytes"));

  pb::BatchLookupRequest many;
  fill_ns(*many.mutable_namespace_());
  for (size_t i = 0; i <= kMaxLookupRequests; ++i) {
    many.add_requests();
  }
  EXPECT_THAT(decode_lookup(many).error().message, HasSubstr("requests in one BatchLookup"));

  pb::BatchLookupRequest digests;
  fill_ns(*digests.mutable_namespace_());
  auto* big = digests.add_requests();
  for (size_t i = 0; i <= kMaxLookupDigests; ++i) {
    big->add_digests(std::string(32, 'a'));
  }
  EXPECT_THAT(decode_lookup(digests).error().message, HasSubstr("digests in one BatchLookup"));
}

TEST(KvWire, StatsRoundTrip) {
  kvcache::StoreStats s;
  s.ram.hits = 1;
  s.ram.capacity = 2;
  s.ssd.misses = 3;
  s.ssd.evictions = 4;
  s.spilled_bytes = 5;
  s.checksum_failures = 6;
  s.torn_tails = 7;
  s.pins_active = 8;
  s.scan_complete = false;
  s.ssd_error = "disk full";
  pb::StatsResponse m;
  encode_stats(s, m);
  const kvcache::StoreStats b = decode_stats(m);
  EXPECT_EQ(b.ram.hits, 1u);
  EXPECT_EQ(b.ram.capacity, 2u);
  EXPECT_EQ(b.ssd.misses, 3u);
  EXPECT_EQ(b.ssd.evictions, 4u);
  EXPECT_EQ(b.spilled_bytes, 5u);
  EXPECT_EQ(b.checksum_failures, 6u);
  EXPECT_EQ(b.torn_tails, 7u);
  EXPECT_EQ(b.pins_active, 8u);
  EXPECT_FALSE(b.scan_complete);
  EXPECT_EQ(b.ssd_error, "disk full");
}

TEST(KvWire, Tiers) {
  EXPECT_EQ(parse_tier("ram"), kvcache::Tier::kRam);
  EXPECT_EQ(parse_tier("ssd"), kvcache::Tier::kSsd);
  EXPECT_EQ(parse_tier("tape"), kvcache::Tier::kNone);
}

}  // namespace
}  // namespace cgn::kvcached
