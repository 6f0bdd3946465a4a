// Splitting a batch of writes into txns that etcd accepts: at most `max_ops`
// ops per txn (etcd's --max-txn-ops, default 128), under a request-size budget,
// and never two writes to the same key in one txn (etcd rejects a put that
// shares a txn with another put of, or a delete covering, the same key).
#pragma once

#include <cstddef>
#include <vector>

#include "state/etcd/etcd_types.h"

namespace cgn::etcd {

// Splits `ops` (kPut / kDelete; kGet is allowed and counts as an op) into
// chunks, preserving order. Each chunk holds at most max(1, max_ops) ops, at
// most `max_bytes` of keys+values unless a single op alone is larger, and no
// conflicting writes. Pure; thread-safe.
std::vector<std::vector<TxnOp>> split_txn_batch(const std::vector<TxnOp>& ops, size_t max_ops = kMaxTxnOps,
                                                size_t max_bytes = kMaxTxnBytes);

}  // namespace cgn::etcd
