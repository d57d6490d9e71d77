// The AVX-512 NVFP4 path: the AVX2 body's arithmetic two sums at a time. A 16-lane register holds
// two 8-lane accumulators side by side (two output rows of one activation row, or one output row
// of two activation rows); each lane still adds the products of inputs k ≡ lane (mod 8) in
// increasing k, and each half is summed with lane_sum8, so every result is the AVX2 and scalar
// paths' bits. A block's weights are decoded for both halves at once: a 16-entry table of the two
// rows' dequantised magnitudes, permuted by code (the half's offset added), the sign from bit 3.
#if defined(__x86_64__)

#include <climits>
#include <cstdint>
#include <cstring>

#include "kernels/avx512_intrinsics.h"
#include "kernels/nvfp4.h"
#include "kernels/nvfp4_matmul_kernels.h"
#include "kernels/tile_walk.h"

namespace md::kernels {

namespace {

// Input rows that share one decode of a block (two per register).
constexpr int64_t kRowGroup = 8;
// Output rows a one-row product runs side by side (two per register).
constexpr int64_t kOutputGroup = 4;

// `low` in the low half, `high` in the high half.
inline __m512 halves(__m256 low, __m256 high) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_broadcast_f64x4(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1));
}

// Magnitudes of the two halves' blocks, (e2m1 · e4m3) · global as the AVX2 table forms them.
inline __m512 block_table(std::uint8_t scale_low, std::uint8_t scale_high, float global) {
  const __m512 magnitudes = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, 0.0f,
                                           0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  const __m512 scales =
      halves(_mm256_set1_ps(kE4m3Values[scale_low]), _mm256_set1_ps(kE4m3Values[scale_high]));
  return _mm512_mul_ps(_mm512_mul_ps(magnitudes, scales), _mm512_set1_ps(global));
}

// Eight codes for each half (code k in bits 4k..4k+3 of `low` and of `high`) as their weights.
inline __m512 weights_of(std::uint32_t low, std::uint32_t high, __m512 table) {
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

std::uint32_t four_bytes(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Eight floats in both halves.
inline __m512 both_halves(const float* p) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(p))));
}

// Eight floats from `low` in the low half and from `high` in the high half.
inline __m512 two_rows(const float* low, const float* high) {
  return halves(_mm256_loadu_ps(low), _mm256_loadu_ps(high));
}

// The two halves' sums, each in the documented lane order.
inline void lane_sums(__m512 acc, float& low, float& high) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  low = lane_sum8(lanes);
  high = lane_sum8(lanes + 8);
}

inline void store(const MatmulOut& out, int64_t n, int64_t r, float sum) {
  float& y = out.y[n * out.y_stride + r];
  y = out.accumulate ? y + sum : sum;
}

// One activation row, kOutputGroup output rows from `r`: rows r + 2i and r + 2i + 1 share a
// register.
void output_group(const Nvfp4Matrix& w, int64_t r, const float* x, const MatmulOut& out) {
  constexpr int64_t kPairs = kOutputGroup / 2;
  __m512 acc[kPairs];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (int64_t b = 0; b < w.cols / kNvfp4Block; ++b) {
    const __m512 x_low = both_halves(x + b * kNvfp4Block);
    const __m512 x_high = both_halves(x + b * kNvfp4Block + 8);
    for (int64_t i = 0; i < kPairs; ++i) {
      const int64_t a = r + 2 * i, c = a + 1;
      const std::uint8_t* codes_a = w.row_codes(a) + b * kNvfp4Block / 2;
      const std::uint8_t* codes_c = w.row_codes(c) + b * kNvfp4Block / 2;
      const __m512 table = block_table(w.row_scales(a)[b], w.row_scales(c)[b], w.global_scale);
      acc[i] = _mm512_fmadd_ps(weights_of(four_bytes(codes_a), four_bytes(codes_c), table), x_low,
                               acc[i]);
      acc[i] = _mm512_fmadd_ps(weights_of(four_bytes(codes_a + 4), four_bytes(codes_c + 4), table),
                               x_high, acc[i]);
    }
  }
  for (int64_t i = 0; i < kPairs; ++i) {
    float low, high;
    lane_sums(acc[i], low, high);
    store(out, 0, r + 2 * i, low);
    store(out, 0, r + 2 * i + 1, high);
  }
}

// One output row, activation rows n0 + 2j and n0 + 2j + 1 sharing a register (an odd last row
// runs in both halves; its high half is dropped).
void row_group(const Nvfp4Matrix& w, int64_t r, const float* x, int64_t x_stride, int64_t n0,
               int64_t group, const MatmulOut& out) {
  constexpr int64_t kPairs = kRowGroup / 2;
  const int64_t pairs = (group + 1) / 2;
  __m512 acc[kPairs];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (int64_t b = 0; b < w.cols / kNvfp4Block; ++b) {
    const std::uint8_t* codes = w.row_codes(r) + b * kNvfp4Block / 2;
    const std::uint8_t scale = w.row_scales(r)[b];
    const __m512 table = block_table(scale, scale, w.global_scale);
    const __m512 low = weights_of(four_bytes(codes), four_bytes(codes), table);
    const __m512 high = weights_of(four_bytes(codes + 4), four_bytes(codes + 4), table);
    for (int64_t j = 0; j < pairs; ++j) {
      const int64_t first = n0 + 2 * j, second = 2 * j + 1 < group ? first + 1 : first;
      const float* xa = x + first * x_stride + b * kNvfp4Block;
      const float* xc = x + second * x_stride + b * kNvfp4Block;
      acc[j] = _mm512_fmadd_ps(low, two_rows(xa, xc), acc[j]);
      acc[j] = _mm512_fmadd_ps(high, two_rows(xa + 8, xc + 8), acc[j]);
    }
  }
  for (int64_t j = 0; j < pairs; ++j) {
    float low, high;
    lane_sums(acc[j], low, high);
    store(out, n0 + 2 * j, r, low);
    if (2 * j + 1 < group) store(out, n0 + 2 * j + 1, r, high);
  }
}

}  // namespace

void nvfp4_matmul_tile_avx512(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out) {
  walk_tile<kOutputGroup, kRowGroup>(
      row_begin, row_end, n_rows, [&](int64_t r) { output_group(w, r, x, out); },
      [&](int64_t r, int64_t n0, int64_t count) { row_group(w, r, x, x_stride, n0, count, out); });
}

}  // namespace md::kernels

#endif  // __x86_64__
