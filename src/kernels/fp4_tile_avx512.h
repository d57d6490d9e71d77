// The AVX-512 body shared by the 4-bit block formats (NVFP4, MXFP4): the AVX2 body's arithmetic
// (fp4_tile_avx2.h) two sums at a time. A 16-lane register holds two 8-lane accumulators side by
// side (two output rows of one activation row, or one output row of two activation rows); each
// lane still adds the products of inputs k ≡ lane (mod 8) in increasing k, and each half is summed
// with lane_sum8, so every result is the AVX2 and scalar paths' bits. A block's weights are
// decoded for both halves at once: a 16-entry table of the two rows' dequantised magnitudes (the
// format's), permuted by code (the half's offset added), the sign from bit 3. Included only by
// translation units compiled with -mavx512f -mfma -ffp-contract=off, and of internal linkage, so
// no other flags' copy can be linked in its place.
#pragma once

#include <climits>
#include <cstdint>
#include <cstring>

#include "kernels/avx512_intrinsics.h"
#include "kernels/lane_sum8.h"
#include "kernels/matmul.h"
#include "kernels/tile_walk.h"

namespace md::kernels {
namespace {

// `low` in the low half, `high` in the high half.
inline __m512 fp4_halves(__m256 low, __m256 high) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_broadcast_f64x4(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1));
}

// e2m1's eight magnitudes in both halves, for the formats' tables.
inline __m512 fp4_magnitudes_twice() {
  return _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, 0.0f, 0.5f, 1.0f, 1.5f,
                        2.0f, 3.0f, 4.0f, 6.0f);
}

// Eight codes for each half (code k in bits 4k..4k+3 of `low` and of `high`) as their weights.
inline __m512 fp4_weights_of(std::uint32_t low, std::uint32_t high, __m512 table) {
  const __m512i codes =
      _mm512_inserti64x4(_mm512_broadcast_i64x4(_mm256_set1_epi32(static_cast<int>(low))),
                         _mm256_set1_epi32(static_cast<int>(high)), 1);
  const __m512i down = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i up = _mm512_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0);
  const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
  const __m512i index =
      _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi32(codes, down), _mm512_set1_epi32(7)), half);
  const __m512 magnitude = _mm512_permutexvar_ps(index, table);
  const __m512i sign = _mm512_and_si512(_mm512_sllv_epi32(codes, up), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(magnitude), sign));
}

inline std::uint32_t fp4_four_bytes(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Eight floats in both halves.
inline __m512 fp4_both_halves(const float* p) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(p))));
}

// Eight floats from `low` in the low half and from `high` in the high half.
inline __m512 fp4_two_rows(const float* low, const float* high) {
  return fp4_halves(_mm256_loadu_ps(low), _mm256_loadu_ps(high));
}

// Stores both halves' sums, each in the documented lane order; `high` null drops the high half.
inline void fp4_store_halves(__m512 acc, float* low, float* high, bool accumulate) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  const float sum_low = lane_sum8(lanes), sum_high = lane_sum8(lanes + 8);
  *low = accumulate ? *low + sum_low : sum_low;
  if (high != nullptr) *high = accumulate ? *high + sum_high : sum_high;
}

// `w` has row_codes(r) and cols; pair_table(a, c, b) gives block b's 8 dequantised magnitudes of
// output row a in the low half and of output row c in the high half.
template <int64_t kBlock, typename Matrix, typename PairTable>
void fp4_tile_avx512(const Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                     int64_t x_stride, int64_t n_rows, const MatmulOut& out,
                     const PairTable& pair_table) {
  constexpr int64_t kRowGroup = 8;     // activation rows that share one decode (two a register)
  constexpr int64_t kOutputGroup = 4;  // output rows a one-row product runs (two a register)
  constexpr int64_t kVectors = kBlock / 8;
  const int64_t blocks = w.cols / kBlock;
  auto y = [&](int64_t n, int64_t r) { return &out.y[n * out.y_stride + r]; };
  // One activation row, output rows r + 2i and r + 2i + 1 sharing a register.
  auto output_group = [&](int64_t r) {
    constexpr int64_t kPairs = kOutputGroup / 2;
    __m512 acc[kPairs];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      __m512 xs[kVectors];
      for (int64_t v = 0; v < kVectors; ++v) xs[v] = fp4_both_halves(x + b * kBlock + 8 * v);
      for (int64_t i = 0; i < kPairs; ++i) {
        const int64_t a = r + 2 * i, c = a + 1;
        const std::uint8_t* codes_a = w.row_codes(a) + b * kBlock / 2;
        const std::uint8_t* codes_c = w.row_codes(c) + b * kBlock / 2;
        const __m512 table = pair_table(a, c, b);
        for (int64_t v = 0; v < kVectors; ++v) {
          const __m512 weights = fp4_weights_of(fp4_four_bytes(codes_a + 4 * v),
                                                fp4_four_bytes(codes_c + 4 * v), table);
          acc[i] = _mm512_fmadd_ps(weights, xs[v], acc[i]);
        }
      }
    }
    for (int64_t i = 0; i < kPairs; ++i) {
      fp4_store_halves(acc[i], y(0, r + 2 * i), y(0, r + 2 * i + 1), out.accumulate);
    }
  };
  // One output row, activation rows n0 + 2j and n0 + 2j + 1 sharing a register (an odd last row
  // runs in both halves; its high half is dropped).
  auto row_group = [&](int64_t r, int64_t n0, int64_t group) {
    constexpr int64_t kPairs = kRowGroup / 2;
    const int64_t pairs = (group + 1) / 2;
    __m512 acc[kPairs];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const std::uint8_t* codes = w.row_codes(r) + b * kBlock / 2;
      const __m512 table = pair_table(r, r, b);
      __m512 weights[kVectors];
      for (int64_t v = 0; v < kVectors; ++v) {
        const std::uint32_t packed = fp4_four_bytes(codes + 4 * v);
        weights[v] = fp4_weights_of(packed, packed, table);
      }
      for (int64_t j = 0; j < pairs; ++j) {
        const int64_t first = n0 + 2 * j, second = 2 * j + 1 < group ? first + 1 : first;
        const float* xa = x + first * x_stride + b * kBlock;
        const float* xc = x + second * x_stride + b * kBlock;
        for (int64_t v = 0; v < kVectors; ++v) {
          acc[j] = _mm512_fmadd_ps(weights[v], fp4_two_rows(xa + 8 * v, xc + 8 * v), acc[j]);
        }
      }
    }
    for (int64_t j = 0; j < pairs; ++j) {
      const int64_t first = n0 + 2 * j;
      fp4_store_halves(acc[j], y(first, r), 2 * j + 1 < group ? y(first + 1, r) : nullptr,
                       out.accumulate);
    }
  };
  walk_tile<kOutputGroup, kRowGroup>(row_begin, row_end, n_rows, output_group, row_group);
}

}  // namespace
}  // namespace md::kernels
