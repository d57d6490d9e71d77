// The AVX-512 path of kernels/attention.h (F + BW + FMA, compiled for those alone and with
// -ffp-contract=off, src/kernels/CMakeLists.txt): a key tile's 16 positions are the 16 lanes of
// one register.
#if defined(__x86_64__)

#include <cstdint>

#include "kernels/attention_tiles.h"
#include "kernels/avx512_intrinsics.h"

namespace md::kernels {

namespace {

struct Avx512 {
  using Vec = __m512;
  static constexpr int64_t kLanes = 16;
  // Independent chains: the fma latency (4) times the two fma ports is 8 in flight; 8 tiles for one
  // query, 4 tiles × 2-4 queries keep 8-16 (measured: 2 tiles × 4 queries, 8 chains exactly,
  // left the score pass latency-bound).
  static constexpr int tiles_for(int queries) { return queries == 1 ? 8 : 4; }

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec broadcast(float x) { return _mm512_set1_ps(x); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(const uint16_t* p) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static float reduce_max(Vec v) { return _mm512_reduce_max_ps(v); }

  // The lane operations of kernels::exp_nonpositive_with.
  using Mask = __mmask16;
  static Mask at_least(Vec x, float c) { return _mm512_cmp_ps_mask(x, broadcast(c), _CMP_GE_OQ); }
  static Vec select(Mask m, Vec a, Vec b) { return _mm512_mask_blend_ps(m, b, a); }
  static Vec pow2(Vec n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static Vec zero_unless(Mask m, Vec v) { return _mm512_maskz_mov_ps(m, v); }
};

}  // namespace

const AttentionKernels kAttentionAvx512 = attention_tiles::kKernels<Avx512>;

}  // namespace md::kernels

#endif  // defined(__x86_64__)
