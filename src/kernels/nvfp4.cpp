#include "kernels/nvfp4.h"

#include <array>

namespace md::kernels {

namespace {

constexpr std::array<float, 8> kE2m1Magnitudes = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

}  // namespace

float e2m1_value(std::uint8_t code) {
  const float magnitude = kE2m1Magnitudes[code & 7u];
  return (code & 8u) != 0 ? -magnitude : magnitude;
}

float e4m3_value(std::uint8_t byte) {
  return kE4m3Values[byte];
}

void dequantize_nvfp4_row(const std::uint8_t* codes, const std::uint8_t* scales, int64_t cols,
                          float global_scale, float* out) {
  for (int64_t block = 0; block < cols / kNvfp4Block; ++block) {
    const float scale = kE4m3Values[scales[block]];
    for (int64_t k = block * kNvfp4Block; k < (block + 1) * kNvfp4Block; k += 2) {
      const std::uint8_t pair = codes[k / 2];
      out[k] = e2m1_value(pair & 0xF) * scale * global_scale;
      out[k + 1] = e2m1_value(static_cast<std::uint8_t>(pair >> 4)) * scale * global_scale;
    }
  }
}

}  // namespace md::kernels
