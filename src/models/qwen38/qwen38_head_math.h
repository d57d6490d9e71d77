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

// Attention query or key head: RMSNorm (scale 1 + w), then RoPE at the precomputed angles.
inline void normalise_and_rotate(float* x, const std::vector<float>& scale, int64_t head_dim,
                                 float eps, const kernels::Rope& rope, const float* cos_values,
                                 const float* sin_values) {
  kernels::rms_norm(x, scale.data(), head_dim, eps, x);
  rope.apply(x, cos_values, sin_values);
}

// The attention output gate: o ← o · σ(gate).
inline void apply_output_gate(float* o, const float* gate, int64_t head_dim) {
  for (int64_t d = 0; d < head_dim; ++d) o[d] *= kernels::sigmoid(gate[d]);
}

}  // namespace md::qwen38
