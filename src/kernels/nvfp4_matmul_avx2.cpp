// The AVX2 NVFP4 path: 16 codes (8 bytes) decoded per block into two vectors of 8 weights — the
// magnitude by a permute of the 8 e2m1 values, the sign from bit 3 — times the block's e4m3 scale
// and the global scale, then one fma per lane into 8 accumulators (lane k mod 8, as the scalar
// path), shared by up to four activation rows.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/nvfp4.h"
#include "kernels/nvfp4_matmul_kernels.h"

namespace md::kernels {

namespace {

constexpr int64_t kRowGroup = 4;

// The 16 weights of one block as two vectors (inputs 0..7 and 8..15 of the block).
inline void decode_block(const std::uint8_t* codes, float scale, float global, __m256& low,
                         __m256& high) {
  const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  std::uint64_t packed;
  std::memcpy(&packed, codes, sizeof packed);
  const __m128i bytes = _mm_cvtsi64_si128(static_cast<long long>(packed));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i even = _mm_and_si128(bytes, mask);                    // codes 0, 2, 4, ...
  const __m128i odd = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);  // codes 1, 3, 5, ...
  const __m128i ordered = _mm_unpacklo_epi8(even, odd);               // codes 0..15 in order
  const __m256 factor = _mm256_set1_ps(scale);
  const __m256 global_factor = _mm256_set1_ps(global);
  auto weights = [&](__m128i eight) {
    const __m256i code = _mm256_cvtepu8_epi32(eight);
    const __m256 magnitude = _mm256_permutevar8x32_ps(magnitudes, code);  // uses code & 7
    const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(code, 3), 31);
    const __m256 value = _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
    return _mm256_mul_ps(_mm256_mul_ps(value, factor), global_factor);
  };
  low = weights(ordered);
  high = weights(_mm_srli_si128(ordered, 8));
}

}  // namespace

void nvfp4_matmul_tile_avx2(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                            const float* x, int64_t x_stride, int64_t n_rows,
                            const MatmulOut& out) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::uint8_t* codes = w.row_codes(r);
    const std::uint8_t* scales = w.row_scales(r);
    for (int64_t n0 = 0; n0 < n_rows; n0 += kRowGroup) {
      const int64_t group = std::min(kRowGroup, n_rows - n0);
      __m256 acc[kRowGroup] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                               _mm256_setzero_ps()};
      for (int64_t b = 0; b < w.cols / kNvfp4Block; ++b) {
        __m256 low, high;
        decode_block(codes + b * kNvfp4Block / 2, e4m3_value(scales[b]), w.global_scale, low, high);
        for (int64_t g = 0; g < group; ++g) {
          const float* xb = x + (n0 + g) * x_stride + b * kNvfp4Block;
          acc[g] = _mm256_fmadd_ps(low, _mm256_loadu_ps(xb), acc[g]);
          acc[g] = _mm256_fmadd_ps(high, _mm256_loadu_ps(xb + 8), acc[g]);
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, acc[g]);
        float& y = out.y[(n0 + g) * out.y_stride + r];
        const float sum = nvfp4_lane_sum(lanes);
        y = out.accumulate ? y + sum : sum;
      }
    }
  }
}

}  // namespace md::kernels

#endif  // __x86_64__
