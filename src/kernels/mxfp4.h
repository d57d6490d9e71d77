// MXFP4 weights (compressed-tensors' `mxfp4-pack-quantized`, the OCP MX FP4 format; docs/models/
// kimi-k3-dspark.md §9): 4-bit e2m1 codes, two per byte along the input axis (code k in the low
// nibble of byte k/2 when k is even), one E8M0 scale byte e per 32 inputs of a row. A weight is
// e2m1(code) · 2^(e − 127): the scale is a power of two, so every finite weight is exact in f32.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

namespace md::kernels {

inline constexpr int64_t kMxfp4Group = 32;

namespace detail {

// 2^(e − 127) for e < 255 (e = 0 is 2^−127, an f32 subnormal); 255 is NaN, as OCP defines it.
constexpr float e8m0_of(unsigned e) {
  if (e == 255) return std::numeric_limits<float>::quiet_NaN();
  float value = 1.0f;
  for (unsigned i = e; i < 127; ++i) value /= 2.0f;  // exact: halving down to the subnormal
  for (unsigned i = 127; i < e; ++i) value *= 2.0f;
  return value;
}

constexpr std::array<float, 256> e8m0_table() {
  std::array<float, 256> t{};
  for (unsigned e = 0; e < 256; ++e) t[e] = e8m0_of(e);
  return t;
}

}  // namespace detail

// Every E8M0 byte's value, for kernels that look scales up per group.
inline constexpr std::array<float, 256> kE8m0Values = detail::e8m0_table();

// Scale bytes a loader must refuse: 0 (2^−127 in OCP, 0 in the seed's bit trick) and 255 (NaN in
// OCP, +inf in the bit trick) have no agreed meaning, and the reference loader rejects both.
constexpr bool e8m0_is_refused(std::uint8_t e) {
  return e == 0 || e == 255;
}

// One row of an MXFP4 matrix: `cols` weights (a multiple of 32) from cols/2 code bytes and
// cols/32 scale bytes, written as f32 (exact: sign · magnitude · 2^(e − 127)).
void dequantize_mxfp4_row(const std::uint8_t* codes, const std::uint8_t* scales, int64_t cols,
                          float* out);

}  // namespace md::kernels
