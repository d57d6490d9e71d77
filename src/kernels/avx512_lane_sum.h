// The lane tree every AVX-512 kernel ends a dot product with: lanes l and l + 8, then l + 4,
// l + 2, l + 1 (the same tree as the scalar and AVX2 paths, which is part of each path's
// reduction-order contract). Include only from translation units compiled for AVX-512: the
// function lives in an anonymous namespace so that each such unit has its own copy and none can
// be picked by the linker for code that runs on any CPU.
#pragma once

#include <immintrin.h>

namespace md::kernels {
namespace {

inline float avx512_lane_sum(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

}  // namespace
}  // namespace md::kernels
