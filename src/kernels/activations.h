// Scalar activations evaluated in f32 (spec §0.2): σ, SiLU and PyTorch's softplus (threshold 20).
#pragma once

#include <cmath>

namespace md::kernels {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x * sigmoid(x); }
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace md::kernels
