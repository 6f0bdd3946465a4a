// Fuzz target: what etcd sends back, and what the client derives from it.
// The first byte picks the path; the rest is its input:
//   0: a WatchResponse -> events -> WatchCursor -> MirrorState.apply
//   1: a RangeResponse -> RangeResult -> MirrorState.reset
//   2: a key -> keys::parse_kv_key (round trip when it parses)
//   3: ops derived from the bytes -> split_txn_batch (limits and conflicts hold)
// Any invariant broken aborts, which the fuzzer reports.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "state/etcd/batch.h"
#include "state/etcd/etcd_endpoints.h"
#include "state/etcd/keys.h"
#include "state/etcd/prefix_mirror.h"
#include "state/etcd/watcher.h"

namespace {

using namespace cgn::etcd;

void check(bool ok) {
  if (!ok) {
    std::abort();
  }
}

void fuzz_watch(const uint8_t* data, size_t size) {
  etcdserverpb::WatchResponse resp;
  if (!resp.ParseFromArray(data, static_cast<int>(size))) {
    return;
  }
  auto events = events_from_proto(resp);
  check(events.size() == static_cast<size_t>(resp.events_size()));
  WatchCursor cursor(resp.header().revision());
  const int64_t floor = cursor.next_revision();
  auto delivered = cursor.accept(events);
  for (const auto& e : delivered) {
    check(e.kv.mod_revision >= floor);
    check(cursor.next_revision() > e.kv.mod_revision ||
          e.kv.mod_revision == std::numeric_limits<int64_t>::max());
  }
  // Nothing is delivered twice (the resume point saturates at INT64_MAX).
  bool at_max = false;
  for (const auto& e : delivered) {
    at_max = at_max || e.kv.mod_revision == std::numeric_limits<int64_t>::max();
  }
  check(at_max || cursor.accept(delivered).empty());
  MirrorState state;
  state.apply(delivered, MirrorCallbacks{});
  check(state.map().size() <= delivered.size());
  for (const auto& e : delivered) {
    (void)keys::parse_kv_key(e.kv.key);
  }
}

void fuzz_range(const uint8_t* data, size_t size) {
  etcdserverpb::RangeResponse resp;
  if (!resp.ParseFromArray(data, static_cast<int>(size))) {
    return;
  }
  RangeResult r = range_from_proto(resp);
  check(r.kvs.size() == static_cast<size_t>(resp.kvs_size()));
  MirrorState state;
  size_t puts = 0;
  MirrorCallbacks cb;
  cb.on_put = [&](const KeyValue&) { ++puts; };
  state.reset(r.kvs, r.revision, cb);
  check(state.map().size() <= r.kvs.size());
  check(puts == state.map().size());
  // Resetting to the same read again changes nothing.
  size_t again = 0;
  cb.on_put = [&](const KeyValue&) { ++again; };
  state.reset(r.kvs, r.revision, cb);
  check(again == 0 || r.kvs.size() != state.map().size());
}

void fuzz_key(const uint8_t* data, size_t size) {
  std::string key(reinterpret_cast<const char*>(data), size);
  auto parsed = keys::parse_kv_key(key);
  if (parsed) {
    check(keys::kv_key(parsed->first, parsed->second) == key);
  }
  (void)keys::node_of(key, keys::kNodesPrefix);
  (void)prefix_range_end(key);
}

void fuzz_batch(const uint8_t* data, size_t size) {
  std::vector<TxnOp> ops;
  for (size_t i = 0; i + 1 < size && ops.size() < 1000; i += 2) {
    std::string key = "/k/" + std::string(1, static_cast<char>('a' + data[i + 1] % 8));
    switch (data[i] % 3) {
      case 0:
        ops.push_back(TxnOp::put(key, std::string(data[i] % 64, 'v')));
        break;
      case 1:
        ops.push_back(TxnOp::del(key, (data[i] & 0x80) != 0));
        break;
      default:
        ops.push_back(TxnOp::get(key));
        break;
    }
  }
  const size_t max_ops = size > 0 ? 1 + data[0] % 16 : 1;
  auto chunks = split_txn_batch(ops, max_ops, 256);
  size_t total = 0;
  for (const auto& c : chunks) {
    check(!c.empty() && c.size() <= max_ops);
    std::set<std::string> put_keys;
    for (const auto& op : c) {
      if (op.kind == TxnOp::Kind::kPut) {
        check(put_keys.insert(op.key).second);
      }
    }
    total += c.size();
  }
  check(total == ops.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1 << 20)) {
    return 0;
  }
  switch (data[0] % 4) {
    case 0:
      fuzz_watch(data + 1, size - 1);
      break;
    case 1:
      fuzz_range(data + 1, size - 1);
      break;
    case 2:
      fuzz_key(data + 1, size - 1);
      break;
    default:
      fuzz_batch(data + 1, size - 1);
      break;
  }
  return 0;
}
