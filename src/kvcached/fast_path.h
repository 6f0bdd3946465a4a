// The local fast path's frames (docs/kvcached.md, "Local fast path"): the messages a colocated
// engine and cgn-kvcached exchange over a SOCK_SEQPACKET Unix socket, one frame per packet. Each
// frame has a fixed layout per op (little-endian, no padding between fields); only LOOKUP carries
// a count. Block bytes never travel in frames: they go through the arena (a memfd the daemon hands
// over with HELLO's answer, SCM_RIGHTS).
//
//   request:  magic u32 | op u8 | 3 zero bytes | body
//     HELLO      version u32
//     PUT_START  key[32] | length u64
//     PUT_END    key[32]
//     PUT_ABORT  key[32]
//     GET        key[32]
//     RELEASE    handle u64
//     LOOKUP     lease_ms u32 | count u32 | key[32] x count   (count <= kMaxLookupKeys)
//     GET_MANY        count u32 | 4 zero | key[32] x count                (count <= kMaxBatchKeys)
//     PUT_START_MANY  count u32 | 4 zero | (key[32] | length u64) x count
//     PUT_END_MANY    count u32 | 4 zero | key[32] x count
//     RELEASE_MANY    flags u32 | count u32 | handle u64 x count   (flags bit 0: kNoReply, no answer)
//   response: magic u32 | op u8 | status u8 | 2 zero bytes | body
//     status != OK: message_len u16 | message (at most kMaxMessage bytes)
//     HELLO      version u32 | 4 zero | arena_bytes u64          (+ the arena memfd)
//     PUT_START  offset u64 | resident u8 | 7 zero   (resident 0: write length bytes at offset, then
//                PUT_END; 1: the block is already resident, nothing to write, no PUT_END)
//     PUT_END, PUT_ABORT, RELEASE: nothing
//     GET        handle u64 | offset u64 | length u64 | tier u8 | 7 zero
//     LOOKUP     lease_until_unix_ms u64 | count u32 | 4 zero | tier u8 x count
//     GET_MANY        count u32 | 4 zero | (status u8 | tier u8 | 6 zero | handle u64 | offset u64 |
//                     length u64) x count
//     PUT_START_MANY  count u32 | 4 zero | (status u8 | resident u8 | 6 zero | offset u64) x count
//     PUT_END_MANY, RELEASE_MANY  count u32 | 4 zero | status u8 x count
//   A batch answer carries one entry per key, in order; an entry whose status is not OK has every
//   other field zero. The frame's own status is OK unless the whole frame was refused.
//
// Encoding and decoding are pure; decoding rejects every frame that is not exactly one of these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "kvcache/block_key.h"
#include "kvcache/store_types.h"

namespace cgn::kvcached {

inline constexpr uint32_t kFrameMagic = 0x3143564B;  // "KVC1" in memory
// Version 2 added the batch ops; a daemon still accepts version 1's HELLO.
inline constexpr uint32_t kFastPathVersion = 2;
inline constexpr uint32_t kFastPathMinVersion = 1;
inline constexpr size_t kMaxLookupKeys = 256;
// Keys (or handles) per batch frame: the largest, PUT_START_MANY, is 16 + 40 x 128 bytes.
inline constexpr size_t kMaxBatchKeys = 128;
// RELEASE_MANY's flags.
inline constexpr uint32_t kNoReply = 1;
inline constexpr size_t kMaxMessage = 256;
// Larger than any valid frame: a packet this long is refused unread.
inline constexpr size_t kMaxFrameBytes = 16 + 32 * kMaxLookupKeys;

enum class Op : uint8_t {
  kHello = 1,
  kPutStart = 2,
  kPutEnd = 3,
  kPutAbort = 4,
  kGet = 5,
  kRelease = 6,
  kLookup = 7,
  kGetMany = 8,
  kPutStartMany = 9,
  kPutEndMany = 10,
  kReleaseMany = 11,
};
std::string_view to_string(Op op);

enum class FrameStatus : uint8_t {
  kOk = 0,
  kNotFound = 1,
  kTooLarge = 2,
  kNoSpace = 3,
  kBusy = 4,         // a put of the key is open, or too many open handles on this connection
  kInvalid = 5,      // a malformed frame or an unknown key/handle
  kUnavailable = 6,  // the daemon is stopping, or an I/O or corruption failure on its side
};
std::string_view to_string(FrameStatus s);

// One key's part of a batch: PUT_START_MANY's request (key, length); every batch answer's entry.
struct PutItem {
  kvcache::BlockKey key{};
  uint64_t length = 0;
  bool operator==(const PutItem&) const = default;
};

struct BatchEntry {
  FrameStatus status = FrameStatus::kOk;
  kvcache::Tier tier = kvcache::Tier::kNone;  // GET_MANY
  bool already_resident = false;              // PUT_START_MANY
  uint64_t handle = 0;                        // GET_MANY
  uint64_t offset = 0;                        // GET_MANY, PUT_START_MANY
  uint64_t length = 0;                        // GET_MANY
  bool operator==(const BatchEntry&) const = default;
};

struct Request {
  Op op = Op::kHello;
  uint32_t version = 0;                 // HELLO
  kvcache::BlockKey key{};              // PUT_START, PUT_END, PUT_ABORT, GET
  uint64_t length = 0;                  // PUT_START
  uint64_t handle = 0;                  // RELEASE
  uint32_t lease_ms = 0;                // LOOKUP
  std::vector<kvcache::BlockKey> keys;  // LOOKUP, GET_MANY, PUT_END_MANY
  std::vector<PutItem> puts;            // PUT_START_MANY
  std::vector<uint64_t> handles;        // RELEASE_MANY
  bool no_reply = false;                // RELEASE_MANY: flags & kNoReply
};

struct Response {
  Op op = Op::kHello;
  FrameStatus status = FrameStatus::kOk;
  std::string message;                        // status != kOk
  uint32_t version = 0;                       // HELLO
  uint64_t arena_bytes = 0;                   // HELLO
  uint64_t handle = 0;                        // GET
  uint64_t offset = 0;                        // PUT_START, GET
  bool already_resident = false;              // PUT_START
  uint64_t length = 0;                        // GET
  kvcache::Tier tier = kvcache::Tier::kNone;  // GET
  uint64_t lease_until_unix_ms = 0;           // LOOKUP
  std::vector<kvcache::Tier> tiers;           // LOOKUP
  std::vector<BatchEntry> entries;            // GET_MANY, PUT_START_MANY, PUT_END_MANY, RELEASE_MANY
};

enum class FrameError : uint8_t { kMalformed };

std::vector<uint8_t> encode(const Request& r);
std::vector<uint8_t> encode(const Response& r);
Result<Request, FrameError> decode_request(std::span<const uint8_t> frame);
Result<Response, FrameError> decode_response(std::span<const uint8_t> frame);

// An error answer to `op` (the message cut to kMaxMessage bytes).
Response error_response(Op op, FrameStatus status, std::string message);
// The frame status a store error maps to.
FrameStatus frame_status(kvcache::StoreError e);

}  // namespace cgn::kvcached
