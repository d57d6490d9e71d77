// Kimi Delta Attention's recurrence for one head (docs/models/kimi-k3-dspark.md §6.2 step 4 and
// §6.3): the gated delta rule with a decay per key channel instead of one per head. The state S is
// [dv][dk] row-major, S[v][k]: the transpose of the spec's and fla's S[key][value], so that a
// value row is contiguous, as in the per-head rule (kernels/gated_delta_rule.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/activations.h"

namespace md::kernels {

// The lower-bound gate of one key channel (§6.2 step 2, fla's naive_kda_lowerbound_gate): the
// log-decay lower_bound · σ(exp(A_log) · (f + dt_bias)), in (lower_bound, 0). Not the softplus
// form of the per-head rule. exp_a_log is exp(A_log[head]).
inline float kda_lower_bound_gate(float exp_a_log, float f, float dt_bias, float lower_bound) {
  return lower_bound * sigmoid(exp_a_log * (f + dt_bias));
}

// Inputs of `rows` consecutive tokens for one head: q L2-normalised and scaled by dk^(−1/2),
// k L2-normalised, each row `*_stride` floats after the previous one.
struct KdaRows {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t qk_stride = 0;
  int64_t v_stride = 0;
  const float* beta = nullptr;  // [rows], stride 1
  const float* g = nullptr;     // [rows][dk] log-decay per key channel (≤ 0), g_stride apart
  int64_t g_stride = 0;
  int64_t rows = 0;
};

// One token, decay = e^g per key channel: S[v][c] ← decay[c] · S[v][c], then per value row v
// δ = β (v_v − S_v·k), S_v ← S_v + δ k, out_v = S_v·q, each dot in dot_f32's order. A value
// row depends on no other, so each goes through decay, update and read-out in one pass; the
// arithmetic of every element is the spec's order (decay, prediction, update, read-out).
void kda_step(float* state, int64_t dv, int64_t dk, const float* q, const float* k, const float* v,
              float beta, const float* decay, float* out);

// Token by token (kda_step with decay = exp(g) of each row). out: rows × out_stride.
void kda_recurrent(float* state, int64_t dv, int64_t dk, const KdaRows& in, float* out,
                   int64_t out_stride);

// The same recurrence chunk by chunk (`chunk` rows at a time) in the WY form of §6.3, with
// decay factors only as exp(G_t − G_j), j ≤ t, and exp(G_t) (never exp(−G), which overflows):
// mathematically identical, faster for long prompts; differs from kda_recurrent by rounding.
void kda_chunked(float* state, int64_t dv, int64_t dk, const KdaRows& in, float* out,
                 int64_t out_stride, int64_t chunk);

}  // namespace md::kernels
