// The per-head formulas that both the reference forward and the step program apply, kept in one
// place so that the two evaluate them identically (the step must match the reference bitwise).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/activations.h"
#include "kernels/norms.h"
#include "kernels/rope.h"
#include "models/qwen38/qwen38_weights.h"

namespace md::qwen38 {

inline constexpr float kL2NormEps = 1e-6f;  // fixed, added to the sum of squares (not rms_norm_eps)

// Delta-net key head after the conv: q̂ = L2norm(q) / sqrt(dk), k̂ = L2norm(k) (spec §5 step 3).
inline void normalise_query_key(float* q, float* k, int64_t dk) {
  kernels::l2_normalize(q, dk, kL2NormEps, 1.0f / std::sqrt(static_cast<float>(dk)));
  kernels::l2_normalize(k, dk, kL2NormEps, 1.0f);
}

// Write strength β = σ(b) and log-decay g = −exp(A_log) · softplus(a + dt_bias) of value head j.
inline void delta_gates(const Qwen38GdnWeights& w, int64_t j, float b, float a, float& beta,
                        float& g) {
  auto jj = static_cast<std::size_t>(j);
  beta = kernels::sigmoid(b);
  g = -std::exp(w.a_log[jj]) * kernels::softplus(a + w.dt_bias[jj]);
}

// Attention query or key head: zero-centred RMSNorm, then RoPE at the precomputed angles.
inline void normalise_and_rotate(float* x, const uint16_t* norm, int64_t head_dim, float eps,
                                 const kernels::Rope& rope, const float* cos_values,
                                 const float* sin_values) {
  kernels::rms_norm(x, norm, head_dim, eps, kernels::NormWeight::kZeroCentred, x);
  rope.apply(x, cos_values, sin_values);
}

// The attention output gate: o ← o · σ(gate).
inline void apply_output_gate(float* o, const float* gate, int64_t head_dim) {
  for (int64_t d = 0; d < head_dim; ++d) o[d] *= kernels::sigmoid(gate[d]);
}

}  // namespace md::qwen38
