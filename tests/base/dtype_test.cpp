#include "base/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace md {
namespace {

TEST(DType, NamesRoundTripAndSizes) {
  for (const char* name : {"BF16", "F16", "F32", "F8_E4M3", "U8", "I8", "I32", "I64"}) {
    auto type = dtype_from_name(name);
    ASSERT_TRUE(type.has_value()) << name;
    EXPECT_EQ(dtype_name(*type), name);
  }
  EXPECT_FALSE(dtype_from_name("F4").has_value());
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly half-way between two bf16 values: ties go to the even mantissa.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(DType, HalfAndFp8DecodeKnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(f8e4m3_to_f32(0xc0), -2.0f);
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7f)));
  EXPECT_EQ(f8e5m2_to_f32(0x3c), 1.0f);
}

}  // namespace
}  // namespace md
