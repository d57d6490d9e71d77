// The per-head formulas of DFlash2's attention (qwen38-dflash2.md §11.5) that the reference
// forward, the context store and the fused round all apply, written once so the three stay
// bitwise equal by construction.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/norms.h"
#include "kernels/rope.h"

namespace md::dflash2 {

// q_norm or k_norm (plain RMSNorm over the head), then RoPE at the angles of its position.
inline void normalise_and_rotate(float* head, const uint16_t* norm, int64_t head_dim, float eps,
                                 const kernels::Rope& rope, const float* cos_values,
                                 const float* sin_values) {
  kernels::rms_norm(head, norm, head_dim, eps, kernels::NormWeight::kPlain, head);
  rope.apply(head, cos_values, sin_values);
}

// The block rows [first, last] that block row t attends to: every row within the window, before
// and after t, as the block is bidirectional (only rows up to t under the causal ablation).
struct BlockRows {
  int64_t first = 0;
  int64_t last = 0;
};
inline BlockRows visible_block_rows(int64_t t, int64_t rows, int64_t window, bool causal = false) {
  return {std::max<int64_t>(0, t - window + 1), causal ? t : std::min(rows - 1, t + window - 1)};
}

}  // namespace md::dflash2
