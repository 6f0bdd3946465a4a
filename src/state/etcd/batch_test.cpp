#include "state/etcd/batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cgn::etcd {
namespace {

std::vector<TxnOp> puts(int n, const std::string& prefix = "/k/") {
  std::vector<TxnOp> ops;
  for (int i = 0; i < n; ++i) {
    ops.push_back(TxnOp::put(prefix + std::to_string(i), "v"));
  }
  return ops;
}

TEST(SplitTxnBatch, splits_at_128_ops_keeping_order) {
  auto chunks = split_txn_batch(puts(300));
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].size(), 128u);
  EXPECT_EQ(chunks[1].size(), 128u);
  EXPECT_EQ(chunks[2].size(), 44u);
  EXPECT_EQ(chunks[0].front().key, "/k/0");
  EXPECT_EQ(chunks[1].front().key, "/k/128");
  EXPECT_EQ(chunks[2].back().key, "/k/299");
}

TEST(SplitTxnBatch, exactly_the_limit_is_one_txn_and_empty_is_none) {
  EXPECT_EQ(split_txn_batch(puts(128)).size(), 1u);
  EXPECT_EQ(split_txn_batch(puts(129)).size(), 2u);
  EXPECT_TRUE(split_txn_batch({}).empty());
}

TEST(SplitTxnBatch, zero_limit_means_one_op_per_txn) {
  EXPECT_EQ(split_txn_batch(puts(3), 0).size(), 3u);
}

TEST(SplitTxnBatch, respects_the_byte_budget) {
  std::vector<TxnOp> ops;
  for (int i = 0; i < 10; ++i) {
    ops.push_back(TxnOp::put("/big/" + std::to_string(i), std::string(1000, 'x')));
  }
  auto chunks = split_txn_batch(ops, 128, 3000);
  // ~1040 bytes each: two fit under 3000, a third does not.
  ASSERT_EQ(chunks.size(), 5u);
  for (const auto& c : chunks) {
    EXPECT_EQ(c.size(), 2u);
  }
  // One op larger than the budget still goes out, alone.
  auto huge = split_txn_batch({TxnOp::put("/h", std::string(5000, 'x')), TxnOp::put("/i", "v")}, 128, 3000);
  ASSERT_EQ(huge.size(), 2u);
}

TEST(SplitTxnBatch, never_puts_one_key_twice_in_a_txn) {
  std::vector<TxnOp> ops = {TxnOp::put("/a", "1"), TxnOp::put("/b", "1"), TxnOp::put("/a", "2")};
  auto chunks = split_txn_batch(ops);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].size(), 2u);
  EXPECT_EQ(chunks[1][0].value, "2");
}

TEST(SplitTxnBatch, separates_a_delete_from_puts_it_covers) {
  std::vector<TxnOp> ops = {TxnOp::del("/p/", true), TxnOp::put("/q", "1"), TxnOp::put("/p/x", "1")};
  auto chunks = split_txn_batch(ops);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].size(), 2u);  // the delete and the unrelated put
  EXPECT_EQ(chunks[1][0].key, "/p/x");

  std::vector<TxnOp> exact = {TxnOp::put("/a", "1"), TxnOp::del("/a")};
  EXPECT_EQ(split_txn_batch(exact).size(), 2u);
}

TEST(SplitTxnBatch, lets_deletes_overlap_in_one_txn) {
  std::vector<TxnOp> ops = {TxnOp::del("/p/", true), TxnOp::del("/p/x"), TxnOp::del("/p/x")};
  EXPECT_EQ(split_txn_batch(ops).size(), 1u);
}

}  // namespace
}  // namespace cgn::etcd
