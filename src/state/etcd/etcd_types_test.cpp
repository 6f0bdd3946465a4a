#include "state/etcd/etcd_types.h"

#include <gtest/gtest.h>

#include <string>

namespace cgn::etcd {
namespace {

TEST(PrefixRangeEnd, increments_last_byte) {
  EXPECT_EQ(prefix_range_end("/cognitora/kv/"), "/cognitora/kv0");
  EXPECT_EQ(prefix_range_end("a"), "b");
}

TEST(PrefixRangeEnd, drops_trailing_ff_bytes_before_incrementing) {
  EXPECT_EQ(prefix_range_end(std::string("a\xff\xff", 3)), "b");
  EXPECT_EQ(prefix_range_end(std::string("ab\xff", 3)), "ac");
}

TEST(PrefixRangeEnd, all_ff_or_empty_means_every_key_from_start) {
  EXPECT_EQ(prefix_range_end(std::string("\xff\xff", 2)), std::string(1, '\0'));
  EXPECT_EQ(prefix_range_end(""), std::string(1, '\0'));
}

TEST(PrefixRangeEnd, covers_exactly_the_prefix) {
  const std::string p = "/cognitora/nodes/";
  const std::string end = prefix_range_end(p);
  EXPECT_LT(p + "zzz", end);
  EXPECT_LT(p + std::string("\xff\xff", 2), end);
  EXPECT_GE(std::string("/cognitora/nodes0"), end);
  EXPECT_LT(std::string("/cognitora/nodes"), p);  // shorter key sorts before the range
}

TEST(TxnBuilders, fill_the_fields_they_name) {
  auto put = TxnOp::put("/k", "v", 7);
  EXPECT_EQ(put.kind, TxnOp::Kind::kPut);
  EXPECT_EQ(put.lease, 7);
  EXPECT_EQ(put.value, "v");
  auto del = TxnOp::del("/p/", true);
  EXPECT_EQ(del.kind, TxnOp::Kind::kDelete);
  EXPECT_TRUE(del.prefix);
  auto get = TxnOp::get("/p/", true, 5);
  EXPECT_EQ(get.limit, 5);

  auto c = TxnCompare::mod_revision("/k", TxnCompare::Op::kLess, 42);
  EXPECT_EQ(c.target, TxnCompare::Target::kModRevision);
  EXPECT_EQ(c.op, TxnCompare::Op::kLess);
  EXPECT_EQ(c.number, 42);
  auto v = TxnCompare::value_is("/k", TxnCompare::Op::kNotEqual, "x");
  EXPECT_EQ(v.target, TxnCompare::Target::kValue);
  EXPECT_EQ(v.value, "x");
}

TEST(EtcdErrc, every_code_has_a_name) {
  for (auto c :
       {EtcdErrc::kUnavailable, EtcdErrc::kDeadlineExceeded, EtcdErrc::kCompacted, EtcdErrc::kFutureRevision,
        EtcdErrc::kLeaseNotFound, EtcdErrc::kTooManyOps, EtcdErrc::kRequestTooLarge,
        EtcdErrc::kInvalidArgument, EtcdErrc::kCancelled, EtcdErrc::kInternal}) {
    EXPECT_NE(std::string(to_string(c)), "unknown");
  }
}

}  // namespace
}  // namespace cgn::etcd
