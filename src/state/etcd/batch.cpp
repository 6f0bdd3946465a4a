#include "state/etcd/batch.h"

#include <string>

namespace cgn::etcd {
namespace {

// [begin, end) of the keys an op writes; end "" = just `begin`, "\0" = all keys >= begin.
struct KeyRange {
  std::string begin;
  std::string end;
};

KeyRange range_of(const TxnOp& op) {
  if (op.prefix) {
    return {op.key, prefix_range_end(op.key)};
  }
  return {op.key, ""};
}

bool contains(const KeyRange& r, const std::string& key) {
  if (r.end.empty()) {
    return key == r.begin;
  }
  if (key < r.begin) {
    return false;
  }
  return r.end == std::string(1, '\0') || key < r.end;
}

// etcd's checkRequestPut/checkIntervals: puts may not repeat a key, and a
// delete range may not cover a put's key. Deletes may overlap each other.
bool conflicts(const TxnOp& a, const TxnOp& b) {
  using K = TxnOp::Kind;
  if (a.kind == K::kPut && b.kind == K::kPut) {
    return a.key == b.key;
  }
  if (a.kind == K::kPut && b.kind == K::kDelete) {
    return contains(range_of(b), a.key);
  }
  if (a.kind == K::kDelete && b.kind == K::kPut) {
    return contains(range_of(a), b.key);
  }
  return false;
}

}  // namespace

std::vector<std::vector<TxnOp>> split_txn_batch(const std::vector<TxnOp>& ops, size_t max_ops,
                                                size_t max_bytes) {
  if (max_ops == 0) {
    max_ops = 1;
  }
  std::vector<std::vector<TxnOp>> chunks;
  std::vector<TxnOp> cur;
  size_t cur_bytes = 0;
  auto flush = [&] {
    if (!cur.empty()) {
      chunks.push_back(std::move(cur));
      cur.clear();
      cur_bytes = 0;
    }
  };
  for (const TxnOp& op : ops) {
    bool full = cur.size() >= max_ops || (!cur.empty() && cur_bytes + op.approx_bytes() > max_bytes);
    if (!full) {
      // At most max_ops comparisons per op: the chunk is bounded, so this stays cheap.
      for (const TxnOp& other : cur) {
        if (conflicts(other, op)) {
          full = true;
          break;
        }
      }
    }
    if (full) {
      flush();
    }
    cur_bytes += op.approx_bytes();
    cur.push_back(op);
  }
  flush();
  return chunks;
}

}  // namespace cgn::etcd
