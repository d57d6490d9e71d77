// The portable body shared by the 4-bit block formats (NVFP4, MXFP4): each weight row is decoded
// one block at a time into f32 by the format's own dequantiser, and every activation row adds the
// block's products into its 8 lanes in the documented order (kernels/lane_sum8.h) with std::fma,
// which the vector bodies reproduce bit for bit. Included only by translation units compiled with
// -ffp-contract=off, and of internal linkage, so no other flags' copy can be linked in its place.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/lane_sum8.h"
#include "kernels/matmul.h"

namespace md::kernels {
namespace {

// decode(r, b, block) writes the kBlock weights of block b of output row r.
template <int64_t kBlock, typename Decode>
void decoded_block_tile(int64_t cols, int64_t row_begin, int64_t row_end, const float* x,
                        int64_t x_stride, int64_t n_rows, const MatmulOut& out,
                        const Decode& decode) {
  constexpr int kLanes = 8;
  constexpr int64_t kRowGroup = 4;  // activation rows that share one decode of a block
  float block[kBlock];
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t n0 = 0; n0 < n_rows; n0 += kRowGroup) {
      const int64_t group = std::min(kRowGroup, n_rows - n0);
      float lanes[kRowGroup][kLanes] = {};
      for (int64_t b = 0; b < cols / kBlock; ++b) {
        decode(r, b, block);
        for (int64_t g = 0; g < group; ++g) {
          const float* xb = x + (n0 + g) * x_stride + b * kBlock;
          for (int64_t k = 0; k < kBlock; ++k) {
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

}  // namespace
}  // namespace md::kernels
