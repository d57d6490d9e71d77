// The portable NVFP4 path: the documented order (nvfp4_matmul.h) with std::fma, which the vector
// path reproduces bit for bit.
#include <algorithm>
#include <cmath>

#include "kernels/nvfp4.h"
#include "kernels/nvfp4_matmul_kernels.h"

namespace md::kernels {

namespace {

constexpr int kLanes = 8;
// Input rows that share one decode of a weight row's block.
constexpr int64_t kRowGroup = 4;

}  // namespace

void nvfp4_matmul_tile_scalar(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out) {
  float block[kNvfp4Block];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::uint8_t* codes = w.row_codes(r);
    const std::uint8_t* scales = w.row_scales(r);
    for (int64_t n0 = 0; n0 < n_rows; n0 += kRowGroup) {
      const int64_t group = std::min(kRowGroup, n_rows - n0);
      float lanes[kRowGroup][kLanes] = {};
      for (int64_t b = 0; b < w.cols / kNvfp4Block; ++b) {
        dequantize_nvfp4_row(codes + b * kNvfp4Block / 2, scales + b, kNvfp4Block, w.global_scale,
                             block);
        for (int64_t g = 0; g < group; ++g) {
          const float* xb = x + (n0 + g) * x_stride + b * kNvfp4Block;
          for (int64_t k = 0; k < kNvfp4Block; ++k) {
            float& lane = lanes[g][k % kLanes];
            lane = std::fma(block[k], xb[k], lane);
          }
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        float& y = out.y[(n0 + g) * out.y_stride + r];
        const float sum = lane_sum8(lanes[g]);
        y = out.accumulate ? y + sum : sum;
      }
    }
  }
}

}  // namespace md::kernels
