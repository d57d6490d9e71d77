// measure_fma_peak's AVX-512 chains (kernels/arithmetic_peak.h), compiled for AVX-512F alone.
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/arithmetic_peak.h"
#include "kernels/arithmetic_peak_chains.h"

namespace md::kernels {

namespace {

struct Avx512 {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  // Twice the fma latency (4) times the two fma ports of a core: the ports never wait.
  static constexpr int kChains = 16;
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static void store(float* p, Vec v) { _mm512_store_ps(p, v); }
};

}  // namespace

int64_t fma_chains_avx512(int64_t iterations, float& sink) {
  return fma_chains<Avx512>(iterations, sink);
}

}  // namespace md::kernels

#endif  // __x86_64__
