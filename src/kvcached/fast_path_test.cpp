// The fast path's frames: every op round-trips, and every malformed frame is refused with a
// message (never a crash).
#include "kvcached/fast_path.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <utility>

namespace cgn::kvcached {
namespace {

using ::testing::HasSubstr;

kvcache::BlockKey key_of(uint8_t b) {
  kvcache::BlockKey k{};
  k.fill(b);
  return k;
}

TEST(FastPathFrames, RequestsRoundTrip) {
  std::vector<Request> reqs(7);
  reqs[0].op = Op::kHello;
  reqs[0].version = kFastPathVersion;
  reqs[1].op = Op::kPutStart;
  reqs[1].key = key_of(1);
  reqs[1].length = 16ull << 20;
  reqs[2].op = Op::kPutEnd;
  reqs[2].key = key_of(2);
  reqs[3].op = Op::kPutAbort;
  reqs[3].key = key_of(3);
  reqs[4].op = Op::kGet;
  reqs[4].key = key_of(4);
  reqs[5].op = Op::kRelease;
  reqs[5].handle = 77;
  reqs[6].op = Op::kLookup;
  reqs[6].lease_ms = 5000;
  reqs[6].keys = {key_of(5), key_of(6), key_of(7)};
  const size_t sizes[] = {12, 48, 40, 40, 40, 16, 16 + 3 * 32};
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto bytes = encode(reqs[i]);
    EXPECT_EQ(bytes.size(), sizes[i]) << to_string(reqs[i].op);
    auto back = decode_request(bytes);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->op, reqs[i].op);
    EXPECT_EQ(back->version, reqs[i].version);
    EXPECT_EQ(back->key, reqs[i].key);
    EXPECT_EQ(back->length, reqs[i].length);
    EXPECT_EQ(back->handle, reqs[i].handle);
    EXPECT_EQ(back->lease_ms, reqs[i].lease_ms);
    EXPECT_EQ(back->keys, reqs[i].keys);
  }
}

TEST(FastPathFrames, ResponsesRoundTrip) {
  Response hello;
  hello.op = Op::kHello;
  hello.version = 1;
  hello.arena_bytes = 1ull << 30;
  Response put;
  put.op = Op::kPutStart;
  put.offset = 4096;
  put.already_resident = true;
  Response get;
  get.op = Op::kGet;
  get.handle = 9;
  get.offset = 8192;
  get.length = 65536;
  get.tier = kvcache::Tier::kSsd;
  Response lookup;
  lookup.op = Op::kLookup;
  lookup.lease_until_unix_ms = 1234567;
  lookup.tiers = {kvcache::Tier::kRam, kvcache::Tier::kSsd};
  Response err = error_response(Op::kGet, FrameStatus::kNotFound, "no such block");
  for (const Response& r : {hello, put, get, lookup, err}) {
    auto back = decode_response(encode(r));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->op, r.op);
    EXPECT_EQ(back->status, r.status);
    EXPECT_EQ(back->message, r.message);
    EXPECT_EQ(back->arena_bytes, r.arena_bytes);
    EXPECT_EQ(back->offset, r.offset);
    EXPECT_EQ(back->already_resident, r.already_resident);
    EXPECT_EQ(back->handle, r.handle);
    EXPECT_EQ(back->length, r.length);
    EXPECT_EQ(back->tier, r.tier);
    EXPECT_EQ(back->lease_until_unix_ms, r.lease_until_unix_ms);
    EXPECT_EQ(back->tiers, r.tiers);
  }
}

TEST(FastPathFrames, MalformedRequestsAreRefusedWithAReason) {
  Request get;
  get.op = Op::kGet;
  get.key = key_of(1);
  const auto good = encode(get);
  auto bad_magic = good;
  bad_magic[0] ^= 1;
  EXPECT_THAT(decode_request(bad_magic).error().message, HasSubstr("magic"));
  auto bad_op = good;
  bad_op[4] = 99;
  EXPECT_THAT(decode_request(bad_op).error().message, HasSubstr("unknown op 99"));
  auto reserved = good;
  reserved[6] = 1;
  EXPECT_THAT(decode_request(reserved).error().message, HasSubstr("reserved"));
  auto short_frame = good;
  short_frame.pop_back();
  EXPECT_THAT(decode_request(short_frame).error().message, HasSubstr("wrong size"));
  auto long_frame = good;
  long_frame.push_back(0);
  EXPECT_THAT(decode_request(long_frame).error().message, HasSubstr("wrong size"));
  EXPECT_FALSE(decode_request({}).ok());

  Request lookup;
  lookup.op = Op::kLookup;
  lookup.keys = {key_of(1)};
  auto frame = encode(lookup);
  const uint32_t too_many = kMaxLookupKeys + 1;
  std::memcpy(frame.data() + 12, &too_many, 4);
  EXPECT_THAT(decode_request(frame).error().message, HasSubstr("LOOKUP of 257 keys"));
  const uint32_t two = 2;
  std::memcpy(frame.data() + 12, &two, 4);
  EXPECT_THAT(decode_request(frame).error().message, HasSubstr("carries 32 key bytes"));
}

TEST(FastPathFrames, BatchRequestsRoundTrip) {
  Request get;
  get.op = Op::kGetMany;
  get.keys = {key_of(1), key_of(2), key_of(3)};
  Request start;
  start.op = Op::kPutStartMany;
  start.puts = {{key_of(4), 65536}, {key_of(5), 1}};
  Request end;
  end.op = Op::kPutEndMany;
  end.keys = {key_of(6)};
  Request rel;
  rel.op = Op::kReleaseMany;
  rel.handles = {7, 8, 9, 10};
  rel.no_reply = true;
  Request full;
  full.op = Op::kPutStartMany;
  full.puts.resize(kMaxBatchKeys);
  const std::pair<const Request*, size_t> cases[] = {{&get, 16 + 3 * 32},
                                                     {&start, 16 + 2 * 40},
                                                     {&end, 16 + 32},
                                                     {&rel, 16 + 4 * 8},
                                                     {&full, 16 + 128 * 40}};
  for (const auto& [req, size] : cases) {
    const auto bytes = encode(*req);
    EXPECT_EQ(bytes.size(), size) << to_string(req->op);
    EXPECT_LE(bytes.size(), kMaxFrameBytes);
    auto back = decode_request(bytes);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->op, req->op);
    EXPECT_EQ(back->keys, req->keys);
    EXPECT_EQ(back->puts, req->puts);
    EXPECT_EQ(back->handles, req->handles);
    EXPECT_EQ(back->no_reply, req->no_reply);
  }
}

TEST(FastPathFrames, BatchAnswersRoundTripPerKey) {
  BatchEntry found;
  found.handle = 3;
  found.offset = 4096;
  found.length = 65536;
  found.tier = kvcache::Tier::kRam;
  BatchEntry missing;
  missing.status = FrameStatus::kNotFound;
  BatchEntry started;
  started.offset = 8192;
  BatchEntry resident;
  resident.already_resident = true;
  BatchEntry busy;
  busy.status = FrameStatus::kBusy;
  Response get;
  get.op = Op::kGetMany;
  get.entries = {found, missing};
  Response start;
  start.op = Op::kPutStartMany;
  start.entries = {started, resident, busy};
  Response end;
  end.op = Op::kPutEndMany;
  end.entries = {BatchEntry{}, busy};
  Response rel;
  rel.op = Op::kReleaseMany;
  rel.entries = {missing};
  const std::pair<const Response*, size_t> cases[] = {
      {&get, 16 + 2 * 32}, {&start, 16 + 3 * 16}, {&end, 16 + 2}, {&rel, 16 + 1}};
  for (const auto& [resp, size] : cases) {
    const auto bytes = encode(*resp);
    EXPECT_EQ(bytes.size(), size) << to_string(resp->op);
    auto back = decode_response(bytes);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->op, resp->op);
    EXPECT_EQ(back->entries, resp->entries);
  }
  // A failed key's other fields travel as zero, whatever the struct held.
  Response odd;
  odd.op = Op::kGetMany;
  odd.entries = {missing};
  odd.entries[0].offset = 77;
  auto back = decode_response(encode(odd));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->entries[0].offset, 0u);
}

TEST(FastPathFrames, MalformedBatchFramesAreRefusedWithAReason) {
  Request get;
  get.op = Op::kGetMany;
  get.keys = {key_of(1)};
  auto frame = encode(get);
  const uint32_t too_many = kMaxBatchKeys + 1;
  std::memcpy(frame.data() + 8, &too_many, 4);
  EXPECT_THAT(decode_request(frame).error().message, HasSubstr("GET_MANY of 129 keys; 1 to 128"));
  const uint32_t zero = 0;
  std::memcpy(frame.data() + 8, &zero, 4);
  EXPECT_THAT(decode_request(frame).error().message, HasSubstr("GET_MANY of 0 keys"));
  const uint32_t two = 2;
  std::memcpy(frame.data() + 8, &two, 4);
  EXPECT_THAT(decode_request(frame).error().message, HasSubstr("carries 32 bytes of entries; 64 expected"));
  frame = encode(get);
  frame[12] = 1;  // the zero bytes after count
  EXPECT_THAT(decode_request(frame).error().message, HasSubstr("wrong size"));

  Request start;
  start.op = Op::kPutStartMany;
  start.puts = {{key_of(1), 10}};
  frame = encode(start);
  frame.pop_back();  // a torn length
  EXPECT_THAT(decode_request(frame).error().message, HasSubstr("PUT_START_MANY of 1 keys carries 39 bytes"));

  Request rel;
  rel.op = Op::kReleaseMany;
  rel.handles = {1};
  frame = encode(rel);
  frame[8] = 2;  // an undefined flag
  EXPECT_THAT(decode_request(frame).error().message, HasSubstr("RELEASE_MANY flags 0x2"));

  // Answers: a count that disagrees with the entries, a failed entry with fields set, a bad tier.
  Response resp;
  resp.op = Op::kGetMany;
  BatchEntry e;
  e.tier = kvcache::Tier::kRam;
  e.length = 5;
  resp.entries = {e};
  auto answer = encode(resp);
  ASSERT_TRUE(decode_response(answer).ok());
  auto bad = answer;
  std::memcpy(bad.data() + 8, &two, 4);
  EXPECT_FALSE(decode_response(bad).ok());
  bad = answer;
  bad[16] = static_cast<uint8_t>(FrameStatus::kNotFound);  // not OK, yet tier and length set
  EXPECT_FALSE(decode_response(bad).ok());
  bad = answer;
  bad[17] = 9;  // tier
  EXPECT_FALSE(decode_response(bad).ok());
  bad = answer;
  bad[16] = 42;  // status
  EXPECT_FALSE(decode_response(bad).ok());
}

TEST(FastPathFrames, ErrorMessagesAreCut) {
  const Response r = error_response(Op::kGet, FrameStatus::kInvalid, std::string(1000, 'x'));
  EXPECT_EQ(r.message.size(), kMaxMessage);
  auto back = decode_response(encode(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->message.size(), kMaxMessage);
}

TEST(FastPathFrames, StoreErrorsMapToStatuses) {
  EXPECT_EQ(frame_status(kvcache::StoreError::kNotFound), FrameStatus::kNotFound);
  EXPECT_EQ(frame_status(kvcache::StoreError::kCorrupt), FrameStatus::kNotFound);
  EXPECT_EQ(frame_status(kvcache::StoreError::kTooLarge), FrameStatus::kTooLarge);
  EXPECT_EQ(frame_status(kvcache::StoreError::kNoSpace), FrameStatus::kNoSpace);
  EXPECT_EQ(frame_status(kvcache::StoreError::kBusy), FrameStatus::kBusy);
  EXPECT_EQ(frame_status(kvcache::StoreError::kStopped), FrameStatus::kUnavailable);
}

}  // namespace
}  // namespace cgn::kvcached
