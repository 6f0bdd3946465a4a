// Plain value types of the etcd v3 client: keys, values, revisions, txn ops and
// compares, watch events, and the module's error enum. Nothing here touches
// protobuf or gRPC, so callers and unit tests can use them without either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cgn::etcd {

enum class EtcdErrc {
  kUnavailable,       // no endpoint answered (down, refused, connection lost)
  kDeadlineExceeded,  // the per-call deadline passed
  kCompacted,         // asked for a revision that was compacted away
  kFutureRevision,    // asked for a revision newer than the store
  kLeaseNotFound,     // lease expired, revoked, or never existed
  kTooManyOps,        // a txn over the server's --max-txn-ops (default 128)
  kRequestTooLarge,   // over the server's --max-request-bytes (default 1.5 MiB)
  kInvalidArgument,   // rejected request (duplicate key in txn, bad endpoint, empty key...)
  kCancelled,         // the client or its caller stopped the call
  kAuth,              // refused by etcd's auth (wrong user or password, no permission)
  kInternal,          // anything else the server or transport reported
};

const char* to_string(EtcdErrc code);

template <class T>
using EtcdResult = Result<T, EtcdErrc>;
using EtcdStatus = Status<EtcdErrc>;
using EtcdError = Error<EtcdErrc>;

// A key's state at some revision (mvccpb.KeyValue).
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
  bool operator==(const KeyValue&) const = default;
};

// The range_end that turns `prefix` into a prefix scan (etcd's getPrefix):
// increment the last byte < 0xFF and cut after it; "\0" (all keys >= prefix)
// when every byte is 0xFF or the prefix is empty.
std::string prefix_range_end(std::string_view prefix);

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // store revision the read was served at
  int64_t count = 0;     // keys matching, even past `limit`
  bool more = false;     // `limit` cut the answer short
};

struct PutResult {
  int64_t revision = 0;
};

struct DeleteResult {
  int64_t deleted = 0;
  int64_t revision = 0;
};

// One operation inside a txn (RequestOp): get, put or delete of a key or prefix.
struct TxnOp {
  enum class Kind { kGet, kPut, kDelete };
  Kind kind = Kind::kGet;
  std::string key;
  std::string value;    // kPut
  int64_t lease = 0;    // kPut
  bool prefix = false;  // kGet/kDelete: the whole prefix `key`
  int64_t limit = 0;    // kGet

  static TxnOp get(std::string key, bool prefix = false, int64_t limit = 0);
  static TxnOp put(std::string key, std::string value, int64_t lease = 0);
  static TxnOp del(std::string key, bool prefix = false);
  // Bytes this op adds to a request, roughly (for request-size budgeting).
  size_t approx_bytes() const { return key.size() + value.size() + 32; }
};

// One comparison of a txn's guard (Compare). A txn's success ops run when
// every compare holds, its failure ops otherwise.
struct TxnCompare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue, kLease };
  enum class Op { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  Target target = Target::kVersion;
  Op op = Op::kEqual;
  int64_t number = 0;  // version / create_revision / mod_revision / lease
  std::string value;   // kValue

  // version == 0 means "key absent"; create-if-absent is version(key, kEqual, 0).
  static TxnCompare version(std::string key, Op op, int64_t v);
  static TxnCompare create_revision(std::string key, Op op, int64_t rev);
  static TxnCompare mod_revision(std::string key, Op op, int64_t rev);
  static TxnCompare value_is(std::string key, Op op, std::string v);
  static TxnCompare lease_is(std::string key, Op op, int64_t lease);
};

struct TxnRequest {
  std::vector<TxnCompare> compares;
  std::vector<TxnOp> success;
  std::vector<TxnOp> failure;
};

// The response of one op of the branch that ran.
struct TxnOpResult {
  TxnOp::Kind kind = TxnOp::Kind::kGet;
  std::vector<KeyValue> kvs;  // kGet
  int64_t deleted = 0;        // kDelete
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;
  std::vector<TxnOpResult> results;
};

// etcd's default --max-txn-ops: the most ops per branch (and compares) in one txn.
inline constexpr size_t kMaxTxnOps = 128;
// Stay well under etcd's default --max-request-bytes (1.5 MiB).
inline constexpr size_t kMaxTxnBytes = 1024 * 1024;

struct BatchResult {
  size_t txns = 0;       // how many txns were sent
  int64_t revision = 0;  // revision of the last one
};

struct LeaseGrant {
  int64_t id = 0;
  int64_t ttl_seconds = 0;  // what the server granted (it may raise a too-small TTL)
};

struct LeaseTtl {
  int64_t id = 0;
  int64_t ttl_seconds = 0;  // remaining; -1 when the lease does not exist
  int64_t granted_seconds = 0;
  std::vector<std::string> keys;
};

struct ServerStatus {
  std::string version;
  int64_t db_size = 0;
  uint64_t leader = 0;
  uint64_t member_id = 0;
  int64_t revision = 0;
};

// A change seen by a watch (mvccpb.Event). For kDelete, kv carries the key and
// mod_revision = the revision of the delete; value is empty.
struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;
};

// What a Watcher hands its callback: a batch of events (one WatchResponse, in
// revision order, never splitting a revision), or the notice that the
// watcher's next revision was compacted away and it stopped.
struct WatchUpdate {
  enum class Kind { kEvents, kResyncNeeded };
  Kind kind = Kind::kEvents;
  std::vector<WatchEvent> events;
  int64_t revision = 0;          // store revision in the response header
  int64_t compact_revision = 0;  // kResyncNeeded: oldest revision still kept
};

}  // namespace cgn::etcd
