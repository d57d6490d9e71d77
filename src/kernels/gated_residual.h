// A residual stream that mixes in a branch through per-channel gates (Muse Spark's gated
// residuals): s ← α ⊙ s + β ⊙ branch. One function for the reference forwards and the programs'
// instruction, so that both round alike.
#pragma once

#include <cstdint>

namespace md::kernels {

// stream[i] = alpha[i] · stream[i] + beta[i] · branch[i] for i < n.
void gated_residual(const float* alpha, const float* beta, const float* branch, int64_t n,
                    float* stream);

}  // namespace md::kernels
