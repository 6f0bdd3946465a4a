// Gossip wire format (docs/architecture/gossip.md): typed messages, their encoding into one
// datagram of at most `max_datagram` bytes, a bounded decoder for untrusted bytes, and the
// optional HMAC-SHA256 trailer. Pure functions; thread-safe.
//
// Layout (integers little-endian; vu = LEB128 varint, at most 10 bytes; s8 = u8 length + bytes;
// s16 = u16 length + bytes):
//   magic u16 0x4743 | version u8 (1) | type u8 | flags u8 (bit0: HMAC trailer)
//   cluster_id s8 | sender name s8 | sender generation u64 | body | [HMAC-SHA256, first 16 B]
// Bodies: Syn = digest; SynAck = digest, delta; Ack = delta.
//   digest = flags u8 (bit0: complete) | count u16 | count x {name s8, generation u64,
//            heartbeat vu, max_version vu, last_gc_version vu}
//   delta  = count u16 | count x {name s8, generation u64, addr, heartbeat vu, last_gc vu,
//            floor vu, max_version vu, flags u8 (bit0 reset, bit1 complete), kv count u16,
//            kv count x {key s8, version vu, status u8 (0 set, 1 deleted), value s16}}
//   addr   = family u8 (0 unknown, 4, 6) | 4 or 16 address bytes | port u16 (absent when 0)
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cgn::gossip {

inline constexpr uint16_t kMagic = 0x4743;
inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kMaxDatagram = 1400;  // never rely on IP fragmentation
inline constexpr size_t kMacBytes = 16;       // HMAC-SHA256 truncated (RFC 2104 §5)
inline constexpr size_t kMaxName = 64;        // member names, cluster ids, keys
inline constexpr size_t kMaxValue = 1000;     // one value fits a datagram with the largest headers

enum class MessageType : uint8_t { kSyn = 0, kSynAck = 1, kAck = 2 };

// A member's gossip address; family 0 = not known.
struct PeerAddr {
  uint8_t family = 0;  // 0, 4 or 6
  std::array<uint8_t, 16> bytes{};
  uint16_t port = 0;

  bool known() const { return family != 0; }
  bool operator==(const PeerAddr&) const = default;
  auto operator<=>(const PeerAddr&) const = default;
  std::string to_string() const;  // "1.2.3.4:5" or "[::1]:5"; "" when unknown
  std::string host() const;       // "1.2.3.4" or "::1"
  static std::optional<PeerAddr> parse(std::string_view ip, uint16_t port);
};

struct DigestEntry {
  std::string name;
  uint64_t generation = 0;
  uint64_t heartbeat = 0;
  uint64_t max_version = 0;
  uint64_t last_gc_version = 0;
  bool operator==(const DigestEntry&) const = default;
};

struct Digest {
  bool complete = false;  // every member the sender knows is listed
  std::vector<DigestEntry> entries;
  bool operator==(const Digest&) const = default;
};

enum class KvStatus : uint8_t { kSet = 0, kDeleted = 1 };

struct KvUpdate {
  std::string key;
  uint64_t version = 0;
  KvStatus status = KvStatus::kSet;
  std::string value;  // empty when deleted
  bool operator==(const KvUpdate&) const = default;
};

struct NodeDelta {
  std::string name;
  uint64_t generation = 0;
  PeerAddr addr;
  uint64_t heartbeat = 0;
  uint64_t last_gc_version = 0;
  uint64_t floor = 0;        // the receiver must hold this version (KVs are all > floor)
  uint64_t max_version = 0;  // the sender's max version for this member
  bool reset = false;        // the receiver must drop what it holds first (GC'd tombstones)
  bool complete = false;     // every KV above floor is here
  std::vector<KvUpdate> kvs;
  bool operator==(const NodeDelta&) const = default;
};

struct Message {
  MessageType type = MessageType::kSyn;
  std::string cluster_id;
  std::string sender;
  uint64_t sender_generation = 0;
  Digest digest;                 // Syn, SynAck
  std::vector<NodeDelta> delta;  // SynAck, Ack
  bool operator==(const Message&) const = default;
};

// Why a datagram was rejected (also the label of cgn_gossip_packets_rejected_total).
enum class WireError : uint8_t {
  kSize,        // empty, shorter than a header, or over the datagram limit
  kMagic,       // not a gossip packet
  kVersion,     // another protocol version
  kAuth,        // HMAC missing, unexpected or wrong
  kMalformed,   // truncated, overlong varint, bad length, bad type, trailing bytes
  kBadCluster,  // a well-formed packet from another cluster
};
std::string_view to_string(WireError e);

// Encoded sizes, for packing messages to a budget.
size_t header_size(std::string_view cluster_id, std::string_view sender, bool auth);
size_t digest_entry_size(const DigestEntry& e);
size_t node_delta_header_size(const NodeDelta& d);  // without KVs
size_t kv_size(const KvUpdate& kv);
inline constexpr size_t kDigestOverhead = 3;  // flags + count
inline constexpr size_t kDeltaOverhead = 2;   // count

// Encodes; with a non-empty key appends the HMAC trailer. The caller keeps the result within its
// budget (sizes above); the encoder does not cut.
std::vector<uint8_t> encode(const Message& m, std::string_view hmac_key);

// Decodes untrusted bytes: size, magic and version first, then the HMAC (required exactly when
// `hmac_key` is non-empty; it must match `hmac_key` or, while keys rotate, a non-empty
// `rotation_key`), then the body with every length checked; then the cluster id.
Result<Message, WireError> decode(std::span<const uint8_t> bytes, std::string_view cluster_id,
                                  std::string_view hmac_key, size_t max_datagram = kMaxDatagram,
                                  std::string_view rotation_key = {});

// HMAC-SHA256(key, data) truncated to kMacBytes.
std::array<uint8_t, kMacBytes> mac(std::string_view key, std::span<const uint8_t> data);

}  // namespace cgn::gossip
