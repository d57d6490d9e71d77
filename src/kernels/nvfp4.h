// NVFP4 weights (ModelOpt's packing, docs/models/muse-spark-nvfp4.md §6): 4-bit e2m1 codes, two per
// byte along the input axis (code k in the low nibble of byte k/2 when k is even), one e4m3 block
// scale per 16 inputs of a row, and an f32 global scale per quantisation unit. A weight is
// e2m1(code) · e4m3(scale) · global: the first product is exact in f32, the global multiply
// rounds once.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

namespace md::kernels {

inline constexpr int64_t kNvfp4Block = 16;

namespace detail {

// Sign bit 7, exponent bits 6-3 (bias 7), mantissa bits 2-0; exponent 0 is subnormal (m · 2^-9).
constexpr float e4m3_of(unsigned byte) {
  const unsigned exponent = (byte >> 3) & 0xF, mantissa = byte & 7;
  if (exponent == 0xF && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  float value = exponent == 0 ? static_cast<float>(mantissa) / 512.0f
                              : 1.0f + static_cast<float>(mantissa) / 8.0f;
  for (unsigned e = 1; e < exponent; ++e) value *= 2.0f;  // 2^(exponent - 1) …
  if (exponent != 0) value /= 64.0f;                      // … · 2^-6 = 2^(exponent - 7)
  return (byte & 0x80) != 0 ? -value : value;
}

constexpr std::array<float, 256> e4m3_table() {
  std::array<float, 256> t{};
  for (unsigned b = 0; b < 256; ++b) t[b] = e4m3_of(b);
  return t;
}

}  // namespace detail

// Every float8_e4m3fn byte's value, for kernels that look scales up in their inner loops.
inline constexpr std::array<float, 256> kE4m3Values = detail::e4m3_table();

// The value of a 4-bit e2m1 code (bit 3 the sign; code 8 is −0 and decodes to −0.0f).
float e2m1_value(std::uint8_t code);
// The value of a float8_e4m3fn byte (no infinities; 0x7F and 0xFF are NaN).
float e4m3_value(std::uint8_t byte);

// One row of an NVFP4 matrix: `cols` weights (a multiple of 16) from cols/2 code bytes and
// cols/16 scale bytes, times `global_scale`, written as f32.
void dequantize_nvfp4_row(const std::uint8_t* codes, const std::uint8_t* scales, int64_t cols,
                          float global_scale, float* out);

}  // namespace md::kernels
