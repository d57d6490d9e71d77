// The AVX-512 form of the gated delta rule's one-token step (kernels/gated_delta_rule.h), compiled
// with -mavx512f alone (src/kernels/CMakeLists.txt): every element still gets one rounded product
// and one rounded sum, the sixteen lanes of a register are dot_f32's sixteen running sums, and
// avx512_lane_sum folds them in dot_f32's tree, so the result is bitwise the portable step's. What
// it gains: a 128-wide state row is eight registers instead of thirty-two SSE ones, and four rows
// go through together so that their dot products' add chains overlap instead of waiting on each
// other.
#if defined(__x86_64__)

#include <cstdint>

#include "kernels/avx512_intrinsics.h"
#include "kernels/avx512_lane_sum.h"
#include "kernels/gated_delta_rule.h"

namespace md::kernels {

namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kRowsTogether = 4;
constexpr int64_t kPrefetchRows = 16;  // as the portable step: the next head's rows past the end

void prefetch_row(const float* row, int64_t dk) {
  for (int64_t c = 0; c < dk; c += kLanes) __builtin_prefetch(row + c, 1, 3);
}

// Rows [r, r + n) with n ≤ kRowsTogether: S_r ← e^g S_r, δ = β (v_r − S_r·k), S_r += δ k,
// o_r = S_r·q; each row's operations in the portable step's order.
template <int64_t n>
void rows_step(float* state, int64_t r, int64_t dk, const float* q, const float* k, const float* v,
               float beta, float decay, float* out) {
  const __m512 decay_v = _mm512_set1_ps(decay);
  __m512 p[n];
  for (int64_t i = 0; i < n; ++i) {
    prefetch_row(state + (r + i + kPrefetchRows) * dk, dk);
    p[i] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < dk; c += kLanes) {
    const __m512 kc = _mm512_loadu_ps(k + c);
    for (int64_t i = 0; i < n; ++i) {
      float* at = state + (r + i) * dk + c;
      const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(at), decay_v);
      _mm512_storeu_ps(at, x);
      p[i] = _mm512_add_ps(p[i], _mm512_mul_ps(x, kc));
    }
  }
  __m512 delta[n];
  for (int64_t i = 0; i < n; ++i) {
    delta[i] = _mm512_set1_ps(beta * (v[r + i] - avx512_lane_sum(p[i])));
    p[i] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < dk; c += kLanes) {
    const __m512 kc = _mm512_loadu_ps(k + c);
    const __m512 qc = _mm512_loadu_ps(q + c);
    for (int64_t i = 0; i < n; ++i) {
      float* at = state + (r + i) * dk + c;
      const __m512 x = _mm512_add_ps(_mm512_loadu_ps(at), _mm512_mul_ps(delta[i], kc));
      _mm512_storeu_ps(at, x);
      p[i] = _mm512_add_ps(p[i], _mm512_mul_ps(x, qc));
    }
  }
  for (int64_t i = 0; i < n; ++i) out[r + i] = avx512_lane_sum(p[i]);
}

}  // namespace

void gated_delta_step_avx512(float* state, int64_t dv, int64_t dk, const float* q, const float* k,
                             const float* v, float beta, float decay, float* out) {
  int64_t r = 0;
  for (; r + kRowsTogether <= dv; r += kRowsTogether)
    rows_step<kRowsTogether>(state, r, dk, q, k, v, beta, decay, out);
  for (; r < dv; ++r) rows_step<1>(state, r, dk, q, k, v, beta, decay, out);
}

}  // namespace md::kernels

#endif  // defined(__x86_64__)
