#include "kernels/matmul.h"

#include <algorithm>
#include <bit>

namespace md::kernels {

namespace {

constexpr int kLanes = 16;
// Input rows handled per pass over a weight row block: the weights stay in L1 across them.
constexpr int64_t kRowBlock = 4;

inline float widen(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// Lanes are summed pairwise (8+8, 4+4, 2+2, 1+1): a fixed tree, part of the reduction order.
inline float reduce_lanes(float* acc) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

}  // namespace

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += widen(w[i + l]) * x[i + l];
  }
  for (int64_t i = full; i < n; ++i) acc[i - full] += widen(w[i]) * x[i];
  return reduce_lanes(acc);
}

void matmul_rows(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, int64_t row_begin,
                 int64_t row_end) {
  for (int64_t n0 = 0; n0 < n_rows; n0 += kRowBlock) {
    int64_t n1 = std::min(n_rows, n0 + kRowBlock);
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint16_t* weights = w.row(r);
      for (int64_t n = n0; n < n1; ++n) y[n * w.rows + r] = dot_bf16(weights, x + n * w.cols, w.cols);
    }
  }
}

void matmul(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool) {
  if (pool == nullptr || pool->size() == 1) {
    matmul_rows(w, x, n_rows, y, 0, w.rows);
    return;
  }
  pool->parallel_for_work(w.rows, w.rows * w.cols * n_rows, [&](int64_t begin, int64_t end) {
    matmul_rows(w, x, n_rows, y, begin, end);
  });
}

}  // namespace md::kernels
