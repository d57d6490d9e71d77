// The portable path: plain C++ that any x86-64 (or other) CPU runs; the compiler may vectorise it
// for the baseline ISA without changing its order, since nothing is reassociated.
#include <bit>

#include "kernels/matmul_kernels.h"

namespace md::kernels {

namespace {

constexpr int kLanes = 16;

inline float widen(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Column c goes to lane c % 16 (the tail continues the pattern), lanes summed pairwise (8+8,
// 4+4, 2+2, 1+1): the order every output of this path follows.
float dot(const uint16_t* w, const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += widen(w[i + l]) * x[i + l];
  }
  for (int64_t i = full; i < n; ++i) acc[i - full] += widen(w[i]) * x[i];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// One weight row at a time for all input rows: the row (a few KB) stays in L1 between them.
void tile(const Bf16Matrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t x_stride,
          int64_t n_rows, const MatmulOut& out) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint16_t* weights = w.data + r * w.cols;
    for (int64_t n = 0; n < n_rows; ++n) {
      float sum = dot(weights, x + n * x_stride, w.cols);
      float& y = out.y[n * out.y_stride + r];
      y = out.accumulate ? y + sum : sum;
    }
  }
}

}  // namespace

const MatmulKernels kMatmulScalar{dot, tile};

}  // namespace md::kernels
