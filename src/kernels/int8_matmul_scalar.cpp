// The portable int8-rows path: the documented order (int8_matmul.h) with std::fma, which the
// vector path reproduces bit for bit.
#include <algorithm>
#include <cmath>

#include "kernels/int8_matmul_kernels.h"
#include "kernels/lane_sum8.h"

namespace md::kernels {

namespace {

constexpr int kLanes = 8;
// Input rows that share one pass over a weight row.
constexpr int64_t kRowGroup = 4;

}  // namespace

void int8_matmul_tile_scalar(const Int8RowsMatrix& w, int64_t row_begin, int64_t row_end,
                             const float* x, int64_t x_stride, int64_t n_rows,
                             const MatmulOut& out) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::int8_t* q = w.row(r);
    for (int64_t n0 = 0; n0 < n_rows; n0 += kRowGroup) {
      const int64_t group = std::min(kRowGroup, n_rows - n0);
      float lanes[kRowGroup][kLanes] = {};
      for (int64_t c = 0; c < w.cols; ++c) {
        const auto weight = static_cast<float>(q[c]);
        for (int64_t g = 0; g < group; ++g) {
          float& lane = lanes[g][c % kLanes];
          lane = std::fma(weight, x[(n0 + g) * x_stride + c], lane);
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        float& y = out.y[(n0 + g) * out.y_stride + r];
        const float sum = w.scales[r] * lane_sum8(lanes[g]);
        y = out.accumulate ? y + sum : sum;
      }
    }
  }
}

}  // namespace md::kernels
