// measure_fma_peak's AVX-512 chains (kernels/arithmetic_peak.h), compiled for AVX-512F alone.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/arithmetic_peak.h"

namespace md::kernels {

// 16 chains: twice the fma latency (4) times the two fma ports of a core, so the ports never
// wait for a result.
int64_t fma_chains_avx512(int64_t iterations, float& sink) {
  constexpr int kChains = 16;
  const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iterations; ++k) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float total = 0;
  for (float lane : lanes) total += lane;
  sink = total;
  return iterations * kChains * 16 * 2;
}

}  // namespace md::kernels

#endif  // __x86_64__
