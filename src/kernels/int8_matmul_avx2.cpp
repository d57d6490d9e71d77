// The AVX2 int8-rows path: 8 codes widened to f32 per load (exact), one fma per lane into 8
// accumulators (lane c mod 8, as the scalar path). A widened vector serves up to eight activation
// rows; a one-row product runs four output rows side by side.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/int8_matmul_kernels.h"
#include "kernels/lane_sum8.h"
#include "kernels/tile_walk.h"

namespace md::kernels {

namespace {

// Input rows that share one widening of the weights.
constexpr int64_t kRowGroup = 8;
// Output rows a one-row product runs side by side: independent fma chains hide their latency.
constexpr int64_t kOutputGroup = 4;
constexpr int64_t kLanes = 8;

inline __m256 widened(const std::int8_t* q) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

inline float lane_sum(__m256 acc) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  return lane_sum8(lanes);
}

inline void store(const Int8RowsMatrix& w, const MatmulOut& out, int64_t n, int64_t r, float sum) {
  float& y = out.y[n * out.y_stride + r];
  const float scaled = w.scales[r] * sum;
  y = out.accumulate ? y + scaled : scaled;
}

// One activation row, kOutputGroup output rows from `r` side by side.
void output_group(const Int8RowsMatrix& w, int64_t r, const float* x, const MatmulOut& out) {
  __m256 acc[kOutputGroup];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (int64_t c = 0; c < w.cols; c += kLanes) {
    const __m256 xv = _mm256_loadu_ps(x + c);
    for (int64_t i = 0; i < kOutputGroup; ++i) {
      acc[i] = _mm256_fmadd_ps(widened(w.row(r + i) + c), xv, acc[i]);
    }
  }
  for (int64_t i = 0; i < kOutputGroup; ++i) store(w, out, 0, r + i, lane_sum(acc[i]));
}

// One output row, up to kRowGroup activation rows sharing each widened vector.
void row_group(const Int8RowsMatrix& w, int64_t r, const float* x, int64_t x_stride, int64_t n0,
               int64_t group, const MatmulOut& out) {
  __m256 acc[kRowGroup];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (int64_t c = 0; c < w.cols; c += kLanes) {
    const __m256 weights = widened(w.row(r) + c);
    for (int64_t g = 0; g < group; ++g) {
      acc[g] = _mm256_fmadd_ps(weights, _mm256_loadu_ps(x + (n0 + g) * x_stride + c), acc[g]);
    }
  }
  for (int64_t g = 0; g < group; ++g) store(w, out, n0 + g, r, lane_sum(acc[g]));
}

}  // namespace

void int8_matmul_tile_avx2(const Int8RowsMatrix& w, int64_t row_begin, int64_t row_end,
                           const float* x, int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  walk_tile<kOutputGroup, kRowGroup>(
      row_begin, row_end, n_rows, [&](int64_t r) { output_group(w, r, x, out); },
      [&](int64_t r, int64_t n0, int64_t count) { row_group(w, r, x, x_stride, n0, count, out); });
}

}  // namespace md::kernels

#endif  // __x86_64__
