// The AVX2 body shared by the 4-bit block formats (NVFP4, MXFP4): a block's codes are decoded in
// registers, 8 weights a vector — a permute of the block's 8 dequantised magnitudes (the format's
// table), the sign from bit 3 — then one fma per lane into 8 accumulators (input k to lane
// k mod 8, as the portable body). A decoded block serves up to eight activation rows; a one-row
// product runs four output rows side by side. Included only by translation units compiled with
// -mavx2 -mfma -ffp-contract=off, and of internal linkage, so no other flags' copy can be linked
// in its place.
#pragma once

#include <immintrin.h>

#include <climits>
#include <cstdint>
#include <cstring>

#include "kernels/lane_sum8.h"
#include "kernels/matmul.h"
#include "kernels/tile_walk.h"

namespace md::kernels {
namespace {

// Eight codes packed in 4 bytes (code k in bits 4k..4k+3) as their weights: each lane shifts its
// own code down (the permute reads bits 0-2) and its sign bit up to bit 31.
inline __m256 fp4_weights_of(std::uint32_t packed, __m256 table) {
  const __m256i codes = _mm256_set1_epi32(static_cast<int>(packed));
  const __m256i down = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i up = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
  const __m256 magnitude = _mm256_permutevar8x32_ps(table, _mm256_srlv_epi32(codes, down));
  const __m256i sign = _mm256_and_si256(_mm256_sllv_epi32(codes, up), _mm256_set1_epi32(INT32_MIN));
  return _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
}

// The kBlock weights whose codes start at `codes`, as kBlock / 8 vectors.
template <int64_t kBlock>
inline void fp4_decode_block(const std::uint8_t* codes, __m256 table, __m256* weights) {
  for (int64_t v = 0; v < kBlock / 8; ++v) {
    std::uint32_t packed;
    std::memcpy(&packed, codes + 4 * v, sizeof packed);
    weights[v] = fp4_weights_of(packed, table);
  }
}

inline void fp4_store(const MatmulOut& out, int64_t n, int64_t r, __m256 acc) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float& y = out.y[n * out.y_stride + r];
  const float sum = lane_sum8(lanes);
  y = out.accumulate ? y + sum : sum;
}

// `w` has row_codes(r) and cols; table(r, b) gives the 8 dequantised magnitudes of block b of
// output row r.
template <int64_t kBlock, typename Matrix, typename Table>
void fp4_tile_avx2(const Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                   int64_t x_stride, int64_t n_rows, const MatmulOut& out, const Table& table) {
  constexpr int64_t kRowGroup = 8;     // activation rows that share one decode of a block
  constexpr int64_t kOutputGroup = 4;  // independent fma chains hide their latency
  constexpr int64_t kVectors = kBlock / 8;
  const int64_t blocks = w.cols / kBlock;
  auto one_row = [&](int64_t r) {
    __m256 acc[kOutputGroup];
    for (__m256& a : acc) a = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      __m256 xs[kVectors];
      for (int64_t v = 0; v < kVectors; ++v) xs[v] = _mm256_loadu_ps(x + b * kBlock + 8 * v);
      for (int64_t i = 0; i < kOutputGroup; ++i) {
        __m256 weights[kVectors];
        fp4_decode_block<kBlock>(w.row_codes(r + i) + b * kBlock / 2, table(r + i, b), weights);
        for (int64_t v = 0; v < kVectors; ++v) acc[i] = _mm256_fmadd_ps(weights[v], xs[v], acc[i]);
      }
    }
    for (int64_t i = 0; i < kOutputGroup; ++i) fp4_store(out, 0, r + i, acc[i]);
  };
  auto many_rows = [&](int64_t r, int64_t n0, int64_t group) {
    __m256 acc[kRowGroup];
    for (__m256& a : acc) a = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      __m256 weights[kVectors];
      fp4_decode_block<kBlock>(w.row_codes(r) + b * kBlock / 2, table(r, b), weights);
      for (int64_t g = 0; g < group; ++g) {
        const float* xb = x + (n0 + g) * x_stride + b * kBlock;
        for (int64_t v = 0; v < kVectors; ++v) {
          acc[g] = _mm256_fmadd_ps(weights[v], _mm256_loadu_ps(xb + 8 * v), acc[g]);
        }
      }
    }
    for (int64_t g = 0; g < group; ++g) fp4_store(out, n0 + g, r, acc[g]);
  };
  walk_tile<kOutputGroup, kRowGroup>(row_begin, row_end, n_rows, one_row, many_rows);
}

}  // namespace
}  // namespace md::kernels
