// Validation of GGUF headers: every way a file can be malformed gets a precise md::Error that
// names the file and the offending key or tensor.
#include "io/gguf_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gguf_test_util.h"
#include "io_test_util.h"

namespace md {
namespace {

using testing::error_of;
using testing::GgufBuilder;
using ::testing::HasSubstr;
using testing::put_string;
using testing::put_u32;
using testing::put_u64;

constexpr std::uint32_t kF32 = 0, kQ8_0 = 8, kQ4_K = 12;

std::vector<std::uint8_t> floats(std::size_t n) {
  return std::vector<std::uint8_t>(4 * n, 1);
}

std::string parse_error(const std::vector<std::uint8_t>& bytes) {
  return error_of([&] { parse_gguf_header(bytes, "bad.gguf"); });
}

TEST(GgufHeader, ParsesTensorsAndPlacesThemAfterTheAlignedInfos) {
  GgufBuilder b;
  b.string("general.architecture", "llama").u32("llama.block_count", 2);
  b.tensor({"a", kF32, {4, 2}, floats(8)})
      .tensor({"b", kQ8_0, {64}, std::vector<std::uint8_t>(68, 3)});
  auto bytes = b.build();
  GgufHeader h = parse_gguf_header(bytes, "ok.gguf");
  EXPECT_EQ(h.version, 3u);
  EXPECT_EQ(h.alignment, 32u);
  EXPECT_EQ(h.data_offset % 32, 0u);
  ASSERT_EQ(h.metadata.size(), 2u);
  EXPECT_EQ(*h.metadata[0].value.as_string(), "llama");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].dims, (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(h.tensors[0].nbytes, 32u);
  EXPECT_EQ(h.tensors[0].offset, h.data_offset);
  EXPECT_EQ(h.tensors[1].type, GgmlType::kQ8_0);
  EXPECT_EQ(h.tensors[1].nbytes, 68u);
  EXPECT_EQ(h.tensors[1].offset, h.data_offset + 32);
  EXPECT_EQ(h.tensors[1].data, bytes.data() + h.tensors[1].offset);
  EXPECT_EQ(h.tensors[0].rows(), 2);
  EXPECT_EQ(h.tensors[0].row_length(), 4);
}

TEST(GgufHeader, AcceptsVersion2AndAFileWithoutTensors) {
  GgufBuilder b;
  b.version = 2;
  b.u32("x", 1);
  auto bytes = b.build();
  GgufHeader h = parse_gguf_header(bytes, "v2.gguf");
  EXPECT_EQ(h.version, 2u);
  EXPECT_TRUE(h.tensors.empty());
  EXPECT_LE(h.data_offset, bytes.size());
}

TEST(GgufHeader, ReadsEveryValueTypeIncludingNestedArrays) {
  GgufBuilder b;
  b.raw("u8", 0, {200})
      .raw("i8", 1, {0x9c})
      .raw("u16", 2, {0x60, 0xea})
      .raw("i16", 3, {0xd0, 0x8a});
  b.u32("u32", 4000000000u).raw("i32", 5, {0x00, 0x6c, 0xca, 0x88});
  b.raw("f32", 6, {0, 0, 0xc0, 0x3f}).raw("bool", 7, {1});
  b.string("str", "hi");
  std::vector<std::uint8_t> u64, i64, f64, nested;
  put_u64(u64, (1ull << 63) + 5);
  put_u64(i64, static_cast<std::uint64_t>(-5));
  put_u64(f64, 0x400921fb54442d18ull);
  b.raw("u64", 10, u64).raw("i64", 11, i64).raw("f64", 12, f64);
  put_u32(nested, 9);  // array of arrays
  put_u64(nested, 2);
  put_u32(nested, 8);  // [0]: array of strings
  put_u64(nested, 1);
  put_string(nested, "x");
  put_u32(nested, 4);  // [1]: empty array of u32
  put_u64(nested, 0);
  b.raw("nested", 9, nested);
  auto bytes = b.build();
  GgufHeader h = parse_gguf_header(bytes, "types.gguf");
  ASSERT_EQ(h.metadata.size(), 13u);
  auto value = [&](std::size_t i) -> const GgufValue& { return h.metadata[i].value; };
  EXPECT_EQ(value(0).as_int64(), 200);
  EXPECT_EQ(value(1).as_int64(), -100);
  EXPECT_EQ(value(2).as_int64(), 60000);
  EXPECT_EQ(value(3).as_int64(), -30000);
  EXPECT_EQ(value(4).as_int64(), 4000000000);
  EXPECT_EQ(value(5).as_int64(), -2000000000);
  EXPECT_EQ(value(6).as_double(), 1.5);
  EXPECT_EQ(value(7).as_bool(), true);
  EXPECT_EQ(*value(8).as_string(), "hi");
  EXPECT_EQ(value(9).as_int64(), std::nullopt);  // does not fit an int64
  EXPECT_EQ(value(9).describe(), "u64 9223372036854775813");
  EXPECT_EQ(value(10).as_int64(), -5);
  EXPECT_DOUBLE_EQ(*value(11).as_double(), 3.141592653589793);
  const GgufValue::Array& outer = *value(12).as_array();
  ASSERT_EQ(outer.size(), 2u);
  EXPECT_EQ(*(*outer[0].as_array())[0].as_string(), "x");
  EXPECT_EQ(outer[1].element_type(), GgufValueType::kU32);
  EXPECT_TRUE(outer[1].as_array()->empty());
  EXPECT_EQ(value(12).describe(), "array<array>[2]");
}

TEST(GgufHeader, RejectsWrongMagicAndVersions) {
  EXPECT_THAT(parse_error({'G', 'G'}), HasSubstr("truncated"));
  EXPECT_THAT(parse_error({'G', 'G', 'M', 'L', 3, 0, 0, 0}), HasSubstr("not a GGUF file"));
  GgufBuilder b;
  b.version = 1;
  EXPECT_THAT(parse_error(b.build()), HasSubstr("GGUF version 1 is not supported"));
  b.version = 4;
  EXPECT_THAT(parse_error(b.build()), HasSubstr("unsupported GGUF version 4"));
  b.version = 0x03000000;
  EXPECT_THAT(parse_error(b.build()), HasSubstr("big-endian"));
}

TEST(GgufHeader, RejectsTruncationAnywhere) {
  GgufBuilder b;
  b.string("general.name", "x").tensor({"t", kF32, {4}, floats(4)});
  auto bytes = b.build();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    std::string message = parse_error(cut);
    EXPECT_THAT(message, HasSubstr("bad.gguf")) << n;
  }
}

TEST(GgufHeader, RejectsAbsurdCountsAndLengthsBeforeAllocating) {
  GgufBuilder b;
  b.tensor_count = 1ull << 60;
  EXPECT_THAT(parse_error(b.build()), HasSubstr("the tensor count is 1152921504606846976"));
  GgufBuilder kv;
  kv.kv_count = 1ull << 40;
  EXPECT_THAT(parse_error(kv.build()), HasSubstr("the metadata entry count"));
  std::vector<std::uint8_t> huge_string;
  put_u64(huge_string, ~0ull);
  EXPECT_THAT(parse_error(GgufBuilder().raw("s", 8, huge_string).build()),
              HasSubstr("metadata key 's' has length 18446744073709551615"));
  std::vector<std::uint8_t> huge_array;
  put_u32(huge_array, 10);
  put_u64(huge_array, 1ull << 50);
  EXPECT_THAT(parse_error(GgufBuilder().raw("a", 9, huge_array).build()),
              HasSubstr("metadata key 'a' is an array of 1125899906842624 u64 values"));
}

TEST(GgufHeader, RejectsBadValues) {
  EXPECT_THAT(parse_error(GgufBuilder().raw("k", 13, {0}).build()),
              HasSubstr("metadata key 'k' has unknown value type 13"));
  EXPECT_THAT(parse_error(GgufBuilder().raw("flag", 7, {2}).build()),
              HasSubstr("'flag' is a bool stored as 2"));
  EXPECT_THAT(parse_error(GgufBuilder().u32("k", 1).u32("k", 2).build()),
              HasSubstr("metadata key 'k' appears twice"));
  EXPECT_THAT(parse_error(GgufBuilder().u32("", 1).build()), HasSubstr("metadata key #0 is empty"));
  std::vector<std::uint8_t> bad_element;
  put_u32(bad_element, 77);
  put_u64(bad_element, 1);
  EXPECT_THAT(parse_error(GgufBuilder().raw("a", 9, bad_element).build()),
              HasSubstr("'a' (array element type) has unknown value type 77"));
  std::vector<std::uint8_t> deep;
  for (int i = 0; i < 20; ++i) {
    put_u32(deep, 9);
    put_u64(deep, 1);
  }
  EXPECT_THAT(parse_error(GgufBuilder().raw("deep", 9, deep).build()),
              HasSubstr("nests arrays deeper than 8 levels"));
}

TEST(GgufHeader, ValidatesGeneralAlignment) {
  GgufBuilder b;
  b.alignment = 64;
  b.u32("general.alignment", 64)
      .tensor({"a", kF32, {4}, floats(4)})
      .tensor({"b", kF32, {4}, floats(4)});
  GgufHeader h = parse_gguf_header(b.build(), "a64.gguf");
  EXPECT_EQ(h.alignment, 64u);
  EXPECT_EQ(h.data_offset % 64, 0u);
  EXPECT_EQ(h.tensors[1].offset - h.tensors[0].offset, 64u);
  EXPECT_THAT(parse_error(GgufBuilder().u32("general.alignment", 48).build()),
              HasSubstr("general.alignment is 48, expected a power of two"));
  EXPECT_THAT(parse_error(GgufBuilder().u32("general.alignment", 0).build()),
              HasSubstr("power of two"));
  EXPECT_THAT(parse_error(GgufBuilder().string("general.alignment", "32").build()),
              HasSubstr("expected an integer"));
}

TEST(GgufHeader, RejectsBadTensorInfos) {
  auto one = [](testing::GgufTestTensor t) {
    return parse_error(GgufBuilder().tensor(std::move(t)).build());
  };
  EXPECT_THAT(one({"t", 4, {32}, std::vector<std::uint8_t>(64, 0)}),
              HasSubstr("tensor 't' has unknown ggml type 4"));
  EXPECT_THAT(one({"t", 99, {32}, {}}), HasSubstr("unknown ggml type 99"));
  EXPECT_THAT(one({"t", kF32, {1, 1, 1, 1, 1}, floats(1)}),
              HasSubstr("tensor 't' has 5 dimensions, at most 4"));
  EXPECT_THAT(one({"t", kF32, {1ull << 63}, {}}), HasSubstr("too large"));
  EXPECT_THAT(one({"t", kF32, {1ull << 32, 1ull << 32}, {}}),
              HasSubstr("dimensions [4294967296, 4294967296] overflow the element count"));
  EXPECT_THAT(one({"t", kF32, {1ull << 62}, {}}), HasSubstr("overflow the byte size"));
  EXPECT_THAT(one({"t", kQ4_K, {128}, std::vector<std::uint8_t>(144, 0)}),
              HasSubstr("rows of 128 elements, not a multiple of the Q4_K block size 256"));
  EXPECT_THAT(one({"t", kF32, {4}, floats(4), 8}),
              HasSubstr("tensor 't' offset 8 is not a multiple of the alignment 32"));
  EXPECT_THAT(one({"t", kF32, {4}, {}, 1ull << 40}), HasSubstr("runs past the end of the file"));
  EXPECT_THAT(one({"t", kF32, {1000}, floats(4)}), HasSubstr("runs past the end of the file"));
  GgufBuilder dup;
  dup.tensor({"t", kF32, {4}, floats(4)}).tensor({"t", kF32, {4}, floats(4)});
  EXPECT_THAT(parse_error(dup.build()), HasSubstr("tensor 't' appears twice"));
  GgufBuilder overlap;
  overlap.tensor({"a", kF32, {16}, floats(16), 0}).tensor({"b", kF32, {4}, floats(4), 32});
  EXPECT_THAT(parse_error(overlap.build()), HasSubstr("tensors 'a' and 'b' overlap"));
}

TEST(GgufHeader, AllowsEmptyTensorsAnywhereInTheDataSection) {
  GgufBuilder b;
  b.tensor({"a", kF32, {4}, floats(4)}).tensor({"empty", kF32, {0, 3}, {}, 0});
  GgufHeader h = parse_gguf_header(b.build(), "e.gguf");
  EXPECT_EQ(h.tensors[1].nbytes, 0u);
  EXPECT_EQ(h.tensors[1].numel(), 0);
  EXPECT_EQ(h.tensors[1].rows(), 0);
}

}  // namespace
}  // namespace md
