// The gated delta rule of one value head, in f32 (spec §5 step 5 and §8.3). The state S is
// [dv][dk] row-major: S[v][k], the transpose of Hugging Face's layout.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/activations.h"
#include "kernels/norms.h"

namespace md::kernels {

// The L2 norm's epsilon of a delta-net head (added to the sum of squares; not rms_norm_eps).
inline constexpr float kDeltaNetL2Eps = 1e-6f;

// A key head after the conv: q̂ = L2norm(q) / sqrt(dk), k̂ = L2norm(k) (Qwen3.5/3.8 spec §5 step 3).
inline void delta_net_query_key(float* q, float* k, int64_t dk) {
  l2_normalize(q, dk, kDeltaNetL2Eps, 1.0f / std::sqrt(static_cast<float>(dk)));
  l2_normalize(k, dk, kDeltaNetL2Eps, 1.0f);
}

// −exp(A_log), the factor of a value head's log-decay (what llama.cpp's GGUF stores as ssm_a).
inline float delta_net_decay_factor(float a_log) {
  return -std::exp(a_log);
}

// A value head's write strength β = σ(b) and log-decay g = −exp(A_log) · softplus(a + dt_bias),
// given decay_factor = −exp(A_log).
inline void delta_net_gates(float decay_factor, float dt_bias, float b, float a, float& beta,
                            float& g) {
  beta = sigmoid(b);
  g = decay_factor * softplus(a + dt_bias);
}

// Inputs of `rows` consecutive tokens for one value head. q is already L2-normalised and scaled,
// k L2-normalised. Rows are `*_stride` floats apart.
struct DeltaRuleRows {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t qk_stride = 0;
  int64_t v_stride = 0;
  const float* beta = nullptr;  // [rows], stride 1
  const float* g = nullptr;     // [rows] log-decay (≤ 0), stride 1
  int64_t rows = 0;
};

// Token by token: S ← e^g S; p = S k; S ← S + β (v − p) ⊗ k; o = S q. out: rows × out_stride.
void gated_delta_recurrent(float* state, int64_t dv, int64_t dk, const DeltaRuleRows& in,
                           float* out, int64_t out_stride);

// One token's step of every row of a state, decay = e^g given: S ← decay · S, then per row r
// δ = β (v_r − S_r·k), S_r ← S_r + δ k, out_r = S_r·q, each dot in dot_f32's order.
// gated_delta_recurrent uses the AVX-512 form on the avx512 path when dk is a multiple of 16;
// the two are bitwise equal (tests).
void gated_delta_step_portable(float* state, int64_t dv, int64_t dk, const float* q, const float* k,
                               const float* v, float beta, float decay, float* out);
#if defined(__x86_64__)
void gated_delta_step_avx512(float* state, int64_t dv, int64_t dk, const float* q, const float* k,
                             const float* v, float beta, float decay, float* out);
#endif

// The same recurrence evaluated chunk by chunk (chunk rows at a time) with the WY form:
// mathematically identical, faster for long prompts. Differs from the recurrence by rounding only.
void gated_delta_chunked(float* state, int64_t dv, int64_t dk, const DeltaRuleRows& in, float* out,
                         int64_t out_stride, int64_t chunk);

}  // namespace md::kernels
