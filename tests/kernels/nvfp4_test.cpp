// NVFP4's two small number formats and the row dequantisation (docs/models/muse-spark-nvfp4.md §6).
#include "kernels/nvfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace md::kernels {
namespace {

TEST(Nvfp4, E2m1CodesDecodeToTheirValues) {
  const float magnitudes[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int code = 0; code < 16; ++code) {
    const float expected = (code & 8) != 0 ? -magnitudes[code & 7] : magnitudes[code & 7];
    EXPECT_EQ(e2m1_value(static_cast<std::uint8_t>(code)), expected) << code;
  }
  EXPECT_TRUE(std::signbit(e2m1_value(8)));  // −0: the vendor's code for tiny negatives
}

TEST(Nvfp4, E4m3BytesDecodeToTheirValues) {
  EXPECT_EQ(e4m3_value(0x00), 0.0f);
  EXPECT_EQ(e4m3_value(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_value(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_value(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(e4m3_value(0x38), 1.0f);
  EXPECT_EQ(e4m3_value(0x3C), 1.5f);
  EXPECT_EQ(e4m3_value(0x7E), 448.0f);  // the largest
  EXPECT_EQ(e4m3_value(0xB8), -1.0f);
  EXPECT_TRUE(std::isnan(e4m3_value(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_value(0xFF)));
  // Increasing over the positive codes: no gap or overlap between subnormals and normals.
  for (int b = 1; b < 0x7E; ++b) {
    EXPECT_LT(e4m3_value(static_cast<std::uint8_t>(b)),
              e4m3_value(static_cast<std::uint8_t>(b + 1)));
  }
}

// Even codes in the low nibble; one scale per 16 inputs; the global scale applied last.
TEST(Nvfp4, RowsTakeLowNibblesFirstAndOneScalePerBlock) {
  std::vector<std::uint8_t> codes(16);
  for (int i = 0; i < 16; ++i)
    codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(0x21 + i % 2);
  const std::uint8_t scales[2] = {0x38, 0x40};  // 1.0 and 2.0
  std::vector<float> row(32);
  dequantize_nvfp4_row(codes.data(), scales, 32, 0.25f, row.data());
  for (int k = 0; k < 32; ++k) {
    const std::uint8_t byte = codes[static_cast<std::size_t>(k / 2)];
    const float code_value = e2m1_value(k % 2 == 0 ? byte & 0xF : byte >> 4);
    EXPECT_EQ(row[static_cast<std::size_t>(k)], code_value * (k < 16 ? 1.0f : 2.0f) * 0.25f) << k;
  }
  EXPECT_EQ(row[0], 0.5f * 0.25f);  // low nibble of 0x21 is 1 (0.5)
  EXPECT_EQ(row[1], 1.0f * 0.25f);  // high nibble is 2 (1.0)
}

}  // namespace
}  // namespace md::kernels
