#include "state/etcd/batch.h"

#include <string>
#include <string_view>
#include <unordered_set>

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

bool contains(const KeyRange& r, std::string_view key) {
  if (r.end.empty()) {
    return key == r.begin;
  }
  if (key < r.begin) {
    return false;
  }
  return r.end == std::string_view("\0", 1) || key < r.end;
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
  // Index of the current chunk: put keys (hashed, the common case is puts
  // only) and the deletes' ranges (usually few).
  std::unordered_set<std::string_view> put_keys;
  std::vector<const TxnOp*> deletes;
  auto flush = [&] {
    if (!cur.empty()) {
      chunks.push_back(std::move(cur));
      cur.clear();
      cur_bytes = 0;
    }
    put_keys.clear();
    deletes.clear();
  };
  auto conflicts_with_chunk = [&](const TxnOp& op) {
    if (op.kind == TxnOp::Kind::kPut) {
      if (put_keys.count(op.key) > 0) {
        return true;
      }
      for (const TxnOp* d : deletes) {
        if (conflicts(*d, op)) {
          return true;
        }
      }
      return false;
    }
    if (op.kind == TxnOp::Kind::kDelete) {
      if (!op.prefix) {
        return put_keys.count(op.key) > 0;
      }
      const KeyRange range = range_of(op);
      for (std::string_view k : put_keys) {
        if (contains(range, k)) {
          return true;
        }
      }
    }
    return false;
  };
  for (const TxnOp& op : ops) {
    const bool full = cur.size() >= max_ops || (!cur.empty() && cur_bytes + op.approx_bytes() > max_bytes);
    if (full || conflicts_with_chunk(op)) {
      flush();
    }
    cur_bytes += op.approx_bytes();
    cur.push_back(op);
    // cur may reallocate, so index the caller's op (it outlives this call).
    if (op.kind == TxnOp::Kind::kPut) {
      put_keys.insert(op.key);
    } else if (op.kind == TxnOp::Kind::kDelete) {
      deletes.push_back(&op);
    }
  }
  flush();
  return chunks;
}

}  // namespace cgn::etcd
