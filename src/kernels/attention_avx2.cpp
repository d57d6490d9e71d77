// The AVX2 inner loop of kernels/attention.cpp's weighted value sum over a bf16 cache, compiled
// with -mavx2 alone (src/kernels/CMakeLists.txt; no FMA, so that each element is still one
// rounded product and one rounded sum, bitwise what the portable loop computes).
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "base/dtype.h"
#include "kernels/attention.h"

namespace md::kernels {

void add_scaled_bf16_avx2(float p, const uint16_t* v, float* out, int64_t n) {
  const __m256 scale = _mm256_set1_ps(p);
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v + d));
    const __m256 values = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    _mm256_storeu_ps(out + d,
                     _mm256_add_ps(_mm256_loadu_ps(out + d), _mm256_mul_ps(scale, values)));
  }
  for (; d < n; ++d) out[d] += p * bf16_to_f32(v[d]);
}

}  // namespace md::kernels

#endif  // defined(__x86_64__)
