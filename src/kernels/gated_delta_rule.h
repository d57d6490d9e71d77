// The gated delta rule of one value head, in f32 (spec §5 step 5 and §8.3). The state S is
// [dv][dk] row-major: S[v][k], the transpose of Hugging Face's layout.
#pragma once

#include <cstdint>

namespace md::kernels {

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

// The same recurrence evaluated chunk by chunk (chunk rows at a time) with the WY form:
// mathematically identical, faster for long prompts. Differs from the recurrence by rounding only.
void gated_delta_chunked(float* state, int64_t dv, int64_t dk, const DeltaRuleRows& in,
                         float* out, int64_t out_stride, int64_t chunk);

}  // namespace md::kernels
