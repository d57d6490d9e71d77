// The AVX2 path of kernels/attention.h (AVX2 + FMA, compiled for those alone and with
// -ffp-contract=off, src/kernels/CMakeLists.txt): a key tile's 16 positions are two registers.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "kernels/attention_tiles.h"

namespace md::kernels {

namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr int64_t kLanes = 8;
  static constexpr int tiles_for(int queries) { return queries == 1 ? 2 : 1; }

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec broadcast(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec load(const uint16_t* p) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static float reduce_max(Vec v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }

  // The lane operations of kernels::exp_nonpositive_with (a mask is all-ones lanes).
  using Mask = __m256;
  static Mask at_least(Vec x, float c) { return _mm256_cmp_ps(x, broadcast(c), _CMP_GE_OQ); }
  static Vec select(Mask m, Vec a, Vec b) { return _mm256_blendv_ps(b, a, m); }
  static Vec pow2(Vec n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static Vec zero_unless(Mask m, Vec v) { return _mm256_and_ps(v, m); }
};

}  // namespace

const AttentionKernels kAttentionAvx2 = attention_tiles::kKernels<Avx2>;

}  // namespace md::kernels

#endif  // defined(__x86_64__)
