#include "kernels/nvfp4.h"

#include <array>
#include <cmath>
#include <limits>

namespace md::kernels {

namespace {

constexpr std::array<float, 8> kE2m1Magnitudes = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Sign bit 7, exponent bits 6-3 (bias 7), mantissa bits 2-0; exponent 0 is subnormal (m · 2^-9).
float decode_e4m3(std::uint8_t byte) {
  const int exponent = (byte >> 3) & 0xF;
  const int mantissa = byte & 7;
  const float sign = (byte & 0x80) != 0 ? -1.0f : 1.0f;
  if (exponent == 0xF && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[static_cast<std::size_t>(b)] = decode_e4m3(static_cast<std::uint8_t>(b));
    return t;
  }();
  return table;
}

}  // namespace

float e2m1_value(std::uint8_t code) {
  const float magnitude = kE2m1Magnitudes[code & 7u];
  return (code & 8u) != 0 ? -magnitude : magnitude;
}

float e4m3_value(std::uint8_t byte) {
  return e4m3_table()[byte];
}

void dequantize_nvfp4_row(const std::uint8_t* codes, const std::uint8_t* scales, int64_t cols,
                          float global_scale, float* out) {
  const std::array<float, 256>& scale_of = e4m3_table();
  for (int64_t block = 0; block < cols / kNvfp4Block; ++block) {
    const float scale = scale_of[scales[block]];
    for (int64_t k = block * kNvfp4Block; k < (block + 1) * kNvfp4Block; k += 2) {
      const std::uint8_t pair = codes[k / 2];
      out[k] = e2m1_value(pair & 0xF) * scale * global_scale;
      out[k + 1] = e2m1_value(static_cast<std::uint8_t>(pair >> 4)) * scale * global_scale;
    }
  }
}

}  // namespace md::kernels
