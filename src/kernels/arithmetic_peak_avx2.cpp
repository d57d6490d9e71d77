// measure_fma_peak's AVX2 chains (kernels/arithmetic_peak.h), compiled for AVX2 and FMA alone.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/arithmetic_peak.h"
#include "kernels/arithmetic_peak_chains.h"

namespace md::kernels {

namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  // More than the fma latency times two ports, with room left in the 16 registers.
  static constexpr int kChains = 12;
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static void store(float* p, Vec v) { _mm256_store_ps(p, v); }
};

}  // namespace

int64_t fma_chains_avx2(int64_t iterations, float& sink) {
  return fma_chains<Avx2>(iterations, sink);
}

}  // namespace md::kernels

#endif  // __x86_64__
