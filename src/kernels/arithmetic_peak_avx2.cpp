// measure_fma_peak's AVX2 chains (kernels/arithmetic_peak.h), compiled for AVX2 and FMA alone.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/arithmetic_peak.h"

namespace md::kernels {

// 12 chains: more than the fma latency times two ports, and room left in the 16 registers.
int64_t fma_chains_avx2(int64_t iterations, float& sink) {
  constexpr int kChains = 12;
  const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iterations; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  sink = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
  return iterations * kChains * 8 * 2;
}

}  // namespace md::kernels

#endif  // __x86_64__
