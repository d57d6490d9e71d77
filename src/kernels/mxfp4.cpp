#include "kernels/mxfp4.h"

#include "kernels/nvfp4.h"

namespace md::kernels {

void dequantize_mxfp4_row(const std::uint8_t* codes, const std::uint8_t* scales, int64_t cols,
                          float* out) {
  for (int64_t group = 0; group < cols / kMxfp4Group; ++group) {
    const float scale = kE8m0Values[scales[group]];
    for (int64_t k = group * kMxfp4Group; k < (group + 1) * kMxfp4Group; k += 2) {
      const std::uint8_t pair = codes[k / 2];
      out[k] = e2m1_value(pair & 0xF) * scale;
      out[k + 1] = e2m1_value(static_cast<std::uint8_t>(pair >> 4)) * scale;
    }
  }
}

}  // namespace md::kernels
