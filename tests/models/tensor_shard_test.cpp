// The sharding rules of tensor parallelism (models/common/tensor_shard.h): heads shared as whole
// KV groups, or KV heads replicated with their groups shared; weight slices by rows and by
// block-aligned columns (views where the format allows, copies for BF16), routed experts dealt
// to the ranks (expert parallelism), and refusals that say what cannot be shared.
#include "models/common/tensor_shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/ggml_type.h"

namespace md::shard {
namespace {

TEST(AttentionHeads, WholeKvGroupsWhenRanksAreAtMostKvHeads) {
  // SmolLM2: 9 query heads over 3 KV heads.
  HeadShard a = attention_heads(9, 3, 0, 2, "m"), b = attention_heads(9, 3, 1, 2, "m");
  EXPECT_EQ(a.kv_heads.begin, 0);
  EXPECT_EQ(a.kv_heads.end, 2);
  EXPECT_EQ(a.heads.begin, 0);
  EXPECT_EQ(a.heads.end, 6);
  EXPECT_EQ(b.kv_heads.begin, 2);
  EXPECT_EQ(b.kv_heads.end, 3);
  EXPECT_EQ(b.heads.begin, 6);
  EXPECT_EQ(b.heads.end, 9);
  HeadShard one = attention_heads(9, 3, 0, 1, "m");
  EXPECT_EQ(one.heads.size(), 9);
  EXPECT_EQ(one.kv_heads.size(), 3);
}

TEST(AttentionHeads, ReplicatedKvHeadsWhenRanksExceedThem) {
  // 4 query heads over 2 KV heads on 4 ranks: each KV head on two ranks, one query head each.
  for (int r = 0; r < 4; ++r) {
    HeadShard s = attention_heads(4, 2, r, 4, "m");
    EXPECT_EQ(s.kv_heads.begin, r / 2);
    EXPECT_EQ(s.kv_heads.size(), 1);
    EXPECT_EQ(s.heads.begin, r);
    EXPECT_EQ(s.heads.size(), 1);
  }
}

TEST(AttentionHeads, RefusesWhatCannotBeShared) {
  try {
    attention_heads(9, 3, 0, 4, "SmolLM2");
    FAIL() << "4 ranks over 3 KV heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SmolLM2: 4 ranks cannot share 3 KV heads"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(attention_heads(2, 1, 0, 4, "m"), Error);  // a group of 2 over 4 ranks
  EXPECT_THROW(attention_heads(9, 2, 0, 2, "m"), Error);  // no whole groups
}

// A [rows][cols] Q8_0 matrix whose blocks hold their row and block index.
struct Q8Matrix {
  Q8Matrix(int64_t rows, int64_t cols) : bytes(static_cast<std::size_t>(rows * cols / 32 * 34)) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < cols / 32; ++b) {
        bytes[static_cast<std::size_t>((r * (cols / 32) + b) * 34 + 2)] =
            static_cast<std::uint8_t>(r * 16 + b);
      }
    }
    m = {GgmlType::kQ8_0, bytes.data(), rows, cols, static_cast<std::size_t>(cols / 32 * 34)};
  }
  std::vector<std::uint8_t> bytes;
  kernels::GgufMatrix m;
};

// One range of a GGUF matrix, through the format-tagged slicing, back as a GGUF view.
kernels::GgufMatrix rows_of(const kernels::GgufMatrix& w, Range range) {
  std::vector<std::unique_ptr<std::uint8_t[]>> owned;
  const Range ranges[] = {range};
  return shard::rows_of(kernels::WeightMatrix::of(w), ranges, owned, "w").gguf();
}
kernels::GgufMatrix columns_of(const kernels::GgufMatrix& w, Range range,
                               std::vector<std::unique_ptr<std::uint8_t[]>>& owned) {
  const Range ranges[] = {range};
  return shard::columns_of(kernels::WeightMatrix::of(w), ranges, owned, "w").gguf();
}

// Expert parallelism: every expert on exactly one rank, the first ranks one more where they do
// not divide evenly, and no rank left without one.
TEST(RoutedExperts, EvenSharesCoveringEveryExpertOnce) {
  for (const auto& [experts, ranks] : {std::pair<int64_t, int>{16, 2}, {8, 3}, {5, 5}, {896, 32}}) {
    int64_t next = 0;
    for (int r = 0; r < ranks; ++r) {
      const Range mine = routed_experts(experts, r, ranks, "m");
      EXPECT_EQ(mine.begin, next) << experts << " over " << ranks;
      EXPECT_GE(mine.size(), experts / ranks);
      EXPECT_LE(mine.size(), experts / ranks + 1);
      next = mine.end;
    }
    EXPECT_EQ(next, experts);
  }
  const Range first = routed_experts(8, 0, 3, "m");
  EXPECT_EQ(first.size(), 3);
  try {
    (void)routed_experts(4, 0, 8, "model-x");
    ADD_FAILURE() << "8 ranks took 4 experts";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model-x: 8 ranks cannot share 4 routed experts"),
              std::string::npos)
        << e.what();
  }
}

TEST(Slices, RowsAndBlockAlignedColumnsAreViews) {
  Q8Matrix q(4, 128);
  std::vector<std::unique_ptr<std::uint8_t[]>> owned;
  kernels::GgufMatrix rows = rows_of(q.m, {1, 3});
  EXPECT_EQ(rows.rows, 2);
  EXPECT_EQ(rows.row(0)[2], 16);  // row 1, block 0
  kernels::GgufMatrix cols = columns_of(q.m, {64, 128}, owned);
  EXPECT_TRUE(owned.empty());
  EXPECT_EQ(cols.cols, 64);
  EXPECT_EQ(cols.row_bytes, q.m.row_bytes);
  EXPECT_EQ(cols.row(3)[2], 3 * 16 + 2);  // row 3, block 2
  EXPECT_TRUE(kernels::gguf_matmul_accepts(cols));
  // What a product reads of the view: its own two Q8_0 blocks of each row, not the row's stride
  // (the bytes figures and a waiting worker's prefetch count these).
  const kernels::WeightMatrix view = kernels::WeightMatrix::of(cols);
  EXPECT_EQ(view.read_bytes_per_row(), 2 * ggml_type_info(GgmlType::kQ8_0).block_bytes);
  EXPECT_EQ(view.bytes(1, 3), 2 * view.read_bytes_per_row());
  EXPECT_EQ(kernels::WeightMatrix::of(q.m).read_bytes_per_row(), q.m.row_bytes);
  EXPECT_THROW(columns_of(q.m, {16, 64}, owned), Error);  // inside a block
  EXPECT_THROW(rows_of(q.m, {3, 5}), Error);
}

TEST(Slices, Bf16ColumnsAreCopiedRowsOneRowApart) {
  std::vector<uint16_t> values(3 * 8);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint16_t>(i);
  kernels::GgufMatrix w{GgmlType::kBF16, reinterpret_cast<const std::uint8_t*>(values.data()), 3, 8,
                        16};
  std::vector<std::unique_ptr<std::uint8_t[]>> owned;
  kernels::GgufMatrix cols = columns_of(w, {2, 5}, owned);
  ASSERT_EQ(owned.size(), 1u);
  EXPECT_EQ(cols.row_bytes, 6u);
  uint16_t got = 0;
  std::memcpy(&got, cols.row(2) + 4, 2);
  EXPECT_EQ(got, 2 * 8 + 4);  // row 2, column 4
  EXPECT_TRUE(kernels::gguf_matmul_accepts(cols));
}

}  // namespace
}  // namespace md::shard
