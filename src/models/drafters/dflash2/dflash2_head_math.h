// The per-head formulas of DFlash2's attention (qwen38-dflash2.md §11.5) that the reference
// forward, the context store and the fused round all apply, written once so the three stay
// bitwise equal by construction.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/attention_runs.h"
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

using kernels::attend_runs;
using kernels::BlockRows;
using kernels::KeyRun;
using kernels::visible_block_rows;

}  // namespace md::dflash2
