// The AVX2 NVFP4 path: 16 codes (8 bytes) decoded per block into two vectors of 8 weights — a
// permute of the block's 8 dequantised magnitudes, the sign from bit 3 — then one fma per lane
// into 8 accumulators (lane k mod 8, as the scalar path). A decoded block serves up to eight
// activation rows; a one-row product runs four output rows side by side.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "kernels/nvfp4.h"
#include "kernels/nvfp4_matmul_kernels.h"
#include "kernels/tile_walk.h"

namespace md::kernels {

namespace {

// Input rows that share one decode of a block.
constexpr int64_t kRowGroup = 8;
// Output rows a one-row product runs side by side: independent fma chains hide their latency.
constexpr int64_t kOutputGroup = 4;

// The 8 dequantised magnitudes of one block, (e2m1 · e4m3) · global: exactly dequantize_nvfp4_row's
// values, the sign being symmetric.
inline __m256 block_table(std::uint8_t scale, float global) {
  const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  return _mm256_mul_ps(_mm256_mul_ps(magnitudes, _mm256_set1_ps(kE4m3Values[scale])),
                       _mm256_set1_ps(global));
}

// Eight codes packed in 4 bytes (code k in bits 4k..4k+3) as their weights: each lane shifts its
// own code down (the permute reads bits 0-2) and its sign bit up to bit 31.
inline __m256 weights_of(std::uint32_t packed, __m256 table) {
  const __m256i codes = _mm256_set1_epi32(static_cast<int>(packed));
  const __m256i down = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i up = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
  const __m256 magnitude = _mm256_permutevar8x32_ps(table, _mm256_srlv_epi32(codes, down));
  const __m256i sign = _mm256_and_si256(_mm256_sllv_epi32(codes, up), _mm256_set1_epi32(INT32_MIN));
  return _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
}

// The 16 weights of one block as two vectors (inputs 0..7 and 8..15 of the block).
inline void decode_block(const std::uint8_t* codes, std::uint8_t scale, float global, __m256& low,
                         __m256& high) {
  std::uint32_t first, second;
  std::memcpy(&first, codes, sizeof first);
  std::memcpy(&second, codes + 4, sizeof second);
  const __m256 table = block_table(scale, global);
  low = weights_of(first, table);
  high = weights_of(second, table);
}

inline float lane_sum(__m256 acc) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  return lane_sum8(lanes);
}

inline void store(const MatmulOut& out, int64_t n, int64_t r, float sum) {
  float& y = out.y[n * out.y_stride + r];
  y = out.accumulate ? y + sum : sum;
}

// One activation row, kOutputGroup output rows from `r` side by side.
void output_group(const Nvfp4Matrix& w, int64_t r, const float* x, const MatmulOut& out) {
  __m256 acc[kOutputGroup];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.cols / kNvfp4Block; ++b) {
    const __m256 x_low = _mm256_loadu_ps(x + b * kNvfp4Block);
    const __m256 x_high = _mm256_loadu_ps(x + b * kNvfp4Block + 8);
    for (int64_t i = 0; i < kOutputGroup; ++i) {
      __m256 low, high;
      decode_block(w.row_codes(r + i) + b * kNvfp4Block / 2, w.row_scales(r + i)[b], w.global_scale,
                   low, high);
      acc[i] = _mm256_fmadd_ps(low, x_low, acc[i]);
      acc[i] = _mm256_fmadd_ps(high, x_high, acc[i]);
    }
  }
  for (int64_t i = 0; i < kOutputGroup; ++i) store(out, 0, r + i, lane_sum(acc[i]));
}

// One output row, up to kRowGroup activation rows sharing each decoded block.
void row_group(const Nvfp4Matrix& w, int64_t r, const float* x, int64_t x_stride, int64_t n0,
               int64_t group, const MatmulOut& out) {
  __m256 acc[kRowGroup];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.cols / kNvfp4Block; ++b) {
    __m256 low, high;
    decode_block(w.row_codes(r) + b * kNvfp4Block / 2, w.row_scales(r)[b], w.global_scale, low,
                 high);
    for (int64_t g = 0; g < group; ++g) {
      const float* xb = x + (n0 + g) * x_stride + b * kNvfp4Block;
      acc[g] = _mm256_fmadd_ps(low, _mm256_loadu_ps(xb), acc[g]);
      acc[g] = _mm256_fmadd_ps(high, _mm256_loadu_ps(xb + 8), acc[g]);
    }
  }
  for (int64_t g = 0; g < group; ++g) store(out, n0 + g, r, lane_sum(acc[g]));
}

}  // namespace

void nvfp4_matmul_tile_avx2(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                            const float* x, int64_t x_stride, int64_t n_rows,
                            const MatmulOut& out) {
  walk_tile<kOutputGroup, kRowGroup>(
      row_begin, row_end, n_rows, [&](int64_t r) { output_group(w, r, x, out); },
      [&](int64_t r, int64_t n0, int64_t count) { row_group(w, r, x, x_stride, n0, count, out); });
}

}  // namespace md::kernels

#endif  // __x86_64__
