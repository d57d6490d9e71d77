// The ggml type table: ids as GGUF files number them and block sizes as ggml's structs lay out.
#include "base/ggml_type.h"

#include <gtest/gtest.h>

namespace md {
namespace {

TEST(GgmlType, IdsMatchTheGgufNumbering) {
  EXPECT_EQ(ggml_type_from_id(0), GgmlType::kF32);
  EXPECT_EQ(ggml_type_from_id(1), GgmlType::kF16);
  EXPECT_EQ(ggml_type_from_id(2), GgmlType::kQ4_0);
  EXPECT_EQ(ggml_type_from_id(3), GgmlType::kQ4_1);
  EXPECT_EQ(ggml_type_from_id(8), GgmlType::kQ8_0);
  EXPECT_EQ(ggml_type_from_id(12), GgmlType::kQ4_K);
  EXPECT_EQ(ggml_type_from_id(14), GgmlType::kQ6_K);
  EXPECT_EQ(ggml_type_from_id(30), GgmlType::kBF16);
  for (std::uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u}) {
    EXPECT_EQ(ggml_type_from_id(removed), std::nullopt) << removed;
  }
}

TEST(GgmlType, EveryIdHasANameAndABlockLayout) {
  int known = 0;
  for (std::uint32_t id = 0; id < 64; ++id) {
    auto type = ggml_type_from_id(id);
    if (!type) continue;
    ++known;
    const GgmlTypeInfo& info = ggml_type_info(*type);
    EXPECT_FALSE(info.name.empty()) << id;
    EXPECT_GT(info.block_elems, 0u) << id;
    EXPECT_GT(info.block_bytes, 0u) << id;
  }
  EXPECT_EQ(known, 32);
}

TEST(GgmlType, BlockSizesOfTheFormatsMegadecodeReads) {
  auto expect = [](GgmlType type, const char* name, std::uint32_t elems, std::uint32_t bytes) {
    const GgmlTypeInfo& info = ggml_type_info(type);
    EXPECT_EQ(info.name, name);
    EXPECT_EQ(info.block_elems, elems) << name;
    EXPECT_EQ(info.block_bytes, bytes) << name;
  };
  expect(GgmlType::kF32, "F32", 1, 4);
  expect(GgmlType::kF16, "F16", 1, 2);
  expect(GgmlType::kBF16, "BF16", 1, 2);
  expect(GgmlType::kQ8_0, "Q8_0", 32, 34);
  expect(GgmlType::kQ4_0, "Q4_0", 32, 18);
  expect(GgmlType::kQ4_1, "Q4_1", 32, 20);
  expect(GgmlType::kQ5_0, "Q5_0", 32, 22);
  expect(GgmlType::kQ4_K, "Q4_K", 256, 144);
  expect(GgmlType::kQ5_K, "Q5_K", 256, 176);
  expect(GgmlType::kQ6_K, "Q6_K", 256, 210);
  expect(GgmlType::kQ8_K, "Q8_K", 256, 292);
  expect(GgmlType::kI64, "I64", 1, 8);
}

}  // namespace
}  // namespace md
