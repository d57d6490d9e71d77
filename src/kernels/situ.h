// SiTU, Kimi K3's gated activation (docs/models/kimi-k3-dspark.md §8.1):
// SiTU(g, u) = β·tanh(g/β)·σ(g) · λ·tanh(u/λ), in f32, with β = activation_situ_beta (4, caps the
// gate) and λ = activation_situ_linear_beta (25, soft-caps the up projection). No clamps: the
// clamped "SiTUv2" of one GPU library is not K3's (§14 item 10).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/activations.h"

namespace md::kernels {

struct SituParams {
  float beta = 4.0f;
  float linear_beta = 25.0f;
};

// Evaluated in the formula's order: ((β·tanh(g/β))·σ(g)) · (λ·tanh(u/λ)).
inline float situ(float g, float u, SituParams p) {
  const float gate = p.beta * std::tanh(g / p.beta) * sigmoid(g);
  return gate * (p.linear_beta * std::tanh(u / p.linear_beta));
}

// out[i] = situ(gate[i], up[i]) for n elements (out may alias gate or up).
inline void situ_rows(const float* gate, const float* up, int64_t n, SituParams p, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = situ(gate[i], up[i], p);
}

}  // namespace md::kernels
