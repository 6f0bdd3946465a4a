#include "state/etcd/etcd_types.h"

namespace cgn::etcd {

const char* to_string(EtcdErrc code) {
  switch (code) {
    case EtcdErrc::kUnavailable:
      return "unavailable";
    case EtcdErrc::kDeadlineExceeded:
      return "deadline_exceeded";
    case EtcdErrc::kCompacted:
      return "compacted";
    case EtcdErrc::kFutureRevision:
      return "future_revision";
    case EtcdErrc::kLeaseNotFound:
      return "lease_not_found";
    case EtcdErrc::kTooManyOps:
      return "too_many_ops";
    case EtcdErrc::kRequestTooLarge:
      return "request_too_large";
    case EtcdErrc::kInvalidArgument:
      return "invalid_argument";
    case EtcdErrc::kCancelled:
      return "cancelled";
    case EtcdErrc::kAuth:
      return "auth";
    case EtcdErrc::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string prefix_range_end(std::string_view prefix) {
  std::string end(prefix);
  for (size_t i = end.size(); i > 0; --i) {
    auto c = static_cast<unsigned char>(end[i - 1]);
    if (c < 0xFF) {
      end[i - 1] = static_cast<char>(c + 1);
      end.resize(i);
      return end;
    }
  }
  // Empty prefix or all 0xFF: every key >= prefix.
  return std::string(1, '\0');
}

TxnOp TxnOp::get(std::string key, bool prefix, int64_t limit) {
  TxnOp op;
  op.kind = Kind::kGet;
  op.key = std::move(key);
  op.prefix = prefix;
  op.limit = limit;
  return op;
}

TxnOp TxnOp::put(std::string key, std::string value, int64_t lease) {
  TxnOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

TxnOp TxnOp::del(std::string key, bool prefix) {
  TxnOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.prefix = prefix;
  return op;
}

namespace {
TxnCompare make_compare(std::string key, TxnCompare::Target target, TxnCompare::Op op, int64_t n) {
  TxnCompare c;
  c.key = std::move(key);
  c.target = target;
  c.op = op;
  c.number = n;
  return c;
}
}  // namespace

TxnCompare TxnCompare::version(std::string key, Op op, int64_t v) {
  return make_compare(std::move(key), Target::kVersion, op, v);
}
TxnCompare TxnCompare::create_revision(std::string key, Op op, int64_t rev) {
  return make_compare(std::move(key), Target::kCreateRevision, op, rev);
}
TxnCompare TxnCompare::mod_revision(std::string key, Op op, int64_t rev) {
  return make_compare(std::move(key), Target::kModRevision, op, rev);
}
TxnCompare TxnCompare::value_is(std::string key, Op op, std::string v) {
  TxnCompare c = make_compare(std::move(key), Target::kValue, op, 0);
  c.value = std::move(v);
  return c;
}
TxnCompare TxnCompare::lease_is(std::string key, Op op, int64_t lease) {
  return make_compare(std::move(key), Target::kLease, op, lease);
}

}  // namespace cgn::etcd
