// GGUF dequantisation against an independent transcription of each block layout: the oracle
// decodes one element at a time from its index (the kernel decodes whole blocks), so a wrong
// nibble order, scale unpacking or byte offset shows up as a mismatch.
#include "kernels/gguf_dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype.h"

namespace md::kernels {
namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  return bytes;
}

// A finite, positive-or-negative f16 of moderate size at `p` (random bytes could be NaN/inf).
void put_scale(std::uint8_t* p, std::uint64_t seed) {
  std::uint16_t bits = static_cast<std::uint16_t>(0x2000 + seed % 0x1800) | ((seed & 1) << 15);
  p[0] = static_cast<std::uint8_t>(bits);
  p[1] = static_cast<std::uint8_t>(bits >> 8);
}

float f16_at(const std::uint8_t* p) {
  return f16_to_f32(static_cast<std::uint16_t>(p[0] | p[1] << 8));
}

int nibble(const std::uint8_t* bytes, int index, bool high) {
  return high ? bytes[index] >> 4 : bytes[index] & 15;
}

// One element of each format, decoded from its index within the block.
float q8_0_element(const std::uint8_t* b, int i) {
  return f16_at(b) * static_cast<float>(static_cast<std::int8_t>(b[2 + i]));
}
float q4_0_element(const std::uint8_t* b, int i) {
  return f16_at(b) * static_cast<float>(nibble(b + 2, i % 16, i >= 16) - 8);
}
float q4_1_element(const std::uint8_t* b, int i) {
  return f16_at(b) * static_cast<float>(nibble(b + 4, i % 16, i >= 16)) + f16_at(b + 2);
}
// Q4_K: element i is in sub-block s = i / 32; the 6-bit scale/min of s are spread over the 12
// scale bytes (low 6 bits of byte s / s+4 for s < 4, else nibbles of byte s+4 plus the top two
// bits of byte s-4 / s).
float q4_k_element(const std::uint8_t* b, int i) {
  const std::uint8_t* k = b + 4;
  int s = i / 32;
  int scale = s < 4 ? (k[s] & 63) : ((k[s + 4] & 15) | ((k[s - 4] >> 6) << 4));
  int min = s < 4 ? (k[s + 4] & 63) : ((k[s + 4] >> 4) | ((k[s] >> 6) << 4));
  int q = nibble(b + 16, (s / 2) * 32 + i % 32, s % 2 == 1);
  return f16_at(b) * static_cast<float>(scale) * static_cast<float>(q) -
         f16_at(b + 2) * static_cast<float>(min);
}
// Q5_0: element i takes the nibble of Q4_0 and bit i of the little-endian 32-bit qh as its fifth.
float q5_0_element(const std::uint8_t* b, int i) {
  const int fifth = (b[2 + i / 8] >> (i % 8)) & 1;
  return f16_at(b) * static_cast<float>((nibble(b + 6, i % 16, i >= 16) | fifth << 4) - 16);
}
// Q5_K: Q4_K's scales and nibbles (nibbles at byte 48), plus bit s of qh[i % 32] as the fifth bit.
float q5_k_element(const std::uint8_t* b, int i) {
  const std::uint8_t* k = b + 4;
  int s = i / 32;
  int scale = s < 4 ? (k[s] & 63) : ((k[s + 4] & 15) | ((k[s - 4] >> 6) << 4));
  int min = s < 4 ? (k[s + 4] & 63) : ((k[s + 4] >> 4) | ((k[s] >> 6) << 4));
  int q = nibble(b + 48, (s / 2) * 32 + i % 32, s % 2 == 1) | ((b[16 + i % 32] >> s) & 1) << 4;
  return f16_at(b) * static_cast<float>(scale) * static_cast<float>(q) -
         f16_at(b + 2) * static_cast<float>(min);
}
// Q6_K: element i is in half h = i / 128, quarter k = (i % 128) / 32, lane l = i % 32.
float q6_k_element(const std::uint8_t* b, int i) {
  int h = i / 128, k = (i % 128) / 32, l = i % 32;
  int low = nibble(b, 64 * h + 32 * (k & 1) + l, k >= 2);
  int high = (b[128 + 32 * h + l] >> (2 * k)) & 3;
  auto scale = static_cast<std::int8_t>(b[192 + i / 16]);
  return f16_at(b + 208) * static_cast<float>(scale) * static_cast<float>((low | high << 4) - 32);
}

struct Format {
  GgmlType type;
  int elems;
  int bytes;
  float (*element)(const std::uint8_t*, int);
  std::vector<int> scale_offsets;  // where the f16 scales sit in each block
};

void check_format(const Format& f, int blocks, std::uint64_t seed) {
  auto data = random_bytes(static_cast<std::size_t>(f.bytes * blocks), seed);
  for (int b = 0; b < blocks; ++b) {
    for (int off : f.scale_offsets)
      put_scale(&data[static_cast<std::size_t>(b * f.bytes + off)], seed + b * 7 + off);
  }
  std::vector<float> out(static_cast<std::size_t>(f.elems * blocks), -1.0f);
  ASSERT_TRUE(dequantize_row(f.type, data.data(), out.data(), f.elems * blocks));
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < f.elems; ++i) {
      float want = f.element(data.data() + b * f.bytes, i);
      // Same f32 operations in possibly another order: equal to within an ulp.
      ASSERT_NEAR(out[static_cast<std::size_t>(b * f.elems + i)], want,
                  1e-6f * (1 + std::fabs(want)))
          << ggml_type_name(f.type) << " block " << b << " element " << i;
    }
  }
}

TEST(GgufDequant, BlockFormatsMatchAnElementwiseTranscription) {
  check_format({GgmlType::kQ8_0, 32, 34, q8_0_element, {0}}, 5, 1);
  check_format({GgmlType::kQ4_0, 32, 18, q4_0_element, {0}}, 5, 2);
  check_format({GgmlType::kQ4_1, 32, 20, q4_1_element, {0, 2}}, 5, 3);
  check_format({GgmlType::kQ4_K, 256, 144, q4_k_element, {0, 2}}, 3, 4);
  check_format({GgmlType::kQ6_K, 256, 210, q6_k_element, {208}}, 3, 5);
  check_format({GgmlType::kQ5_0, 32, 22, q5_0_element, {0}}, 5, 6);
  check_format({GgmlType::kQ5_K, 256, 176, q5_k_element, {0, 2}}, 3, 7);
}

TEST(GgufDequant, Q4_0KnownBlock) {
  // d = 0.5 (f16 0x3800); byte j = (j+1) << 4 | j: element j = (j - 8)/2, element 16+j = (j-7)/2.
  std::vector<std::uint8_t> block = {0x00, 0x38};
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<std::uint8_t>(((j + 1) & 15) << 4 | j));
  float out[32];
  ASSERT_TRUE(dequantize_row(GgmlType::kQ4_0, block.data(), out, 32));
  EXPECT_EQ(out[0], -4.0f);
  EXPECT_EQ(out[15], 3.5f);
  EXPECT_EQ(out[16], -3.5f);
  EXPECT_EQ(out[31], -4.0f);  // (16 & 15) - 8 = -8
}

TEST(GgufDequant, PlainFloatFormats) {
  const float values[3] = {1.5f, -2.25f, 1e-3f};
  float out[3];
  ASSERT_TRUE(
      dequantize_row(GgmlType::kF32, reinterpret_cast<const std::uint8_t*>(values), out, 3));
  EXPECT_EQ(std::memcmp(out, values, sizeof(values)), 0);
  const std::uint8_t f16[4] = {0x00, 0x3c, 0x00, 0xc0};  // 1.0, -2.0
  ASSERT_TRUE(dequantize_row(GgmlType::kF16, f16, out, 2));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  const std::uint8_t bf16[4] = {0xc0, 0x3f, 0x80, 0xbf};  // 1.5, -1.0
  ASSERT_TRUE(dequantize_row(GgmlType::kBF16, bf16, out, 2));
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -1.0f);
}

TEST(GgufDequant, RefusesUnsupportedTypesAndPartialBlocks) {
  std::vector<std::uint8_t> data(256, 0);
  std::vector<float> out(256, 7.0f);
  EXPECT_FALSE(can_dequantize(GgmlType::kQ5_1));
  EXPECT_FALSE(dequantize_row(GgmlType::kQ3_K, data.data(), out.data(), 256));
  EXPECT_FALSE(dequantize_row(GgmlType::kQ8_0, data.data(), out.data(), 31));
  EXPECT_FALSE(dequantize_row(GgmlType::kF32, data.data(), out.data(), -1));
  EXPECT_EQ(out[0], 7.0f);  // nothing written
  for (GgmlType t :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
        GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    EXPECT_TRUE(can_dequantize(t)) << ggml_type_name(t);
  }
}

}  // namespace
}  // namespace md::kernels
