// Absorbed latent attention: MLA without RoPE decoded over its compressed cache
// (docs/models/kimi-k3-dspark.md §7.3). With no rotation, both halves of kv_b_proj fold into the
// query and the output: per head h, with W_UK_h and W_UV_h its key and value rows of kv_b_proj
// ([nope × rank] and [v × rank]),
//   q_latent_h = W_UK_hᵀ · q_nope_h                     (the caller's GEMV, before)
//   score_{h,t} = (q_latent_h · c_t + q_shared_h · s_t) · scale
//   context_h   = Σ_t softmax_t(score_h) · c_t
//   o_h         = W_UV_h · context_h                     (the caller's GEMV, after)
// where c_t (rank wide, the normed latent) and s_t (the unrotated shared key part) are all a
// position caches: rank + shared floats instead of heads · (nope + shared + v). Mathematically the
// non-absorbed form (expand every c_t into keys and values, then attend); rounding differs.
//
// A cache row [c_t | s_t] is then one key of rank + shared floats whose first rank floats are
// also its value, and each head is ordinary single-key-head attention over the rows
// (kernels::attend_runs with a value narrower than the key).
#pragma once

#include <cstdint>

namespace md::kernels {

// For heads [0, heads): q [heads][rank + shared_dim] (each head's q_latent, then its q_shared) in,
// context [heads][rank] out, over cache rows [positions][rank + shared_dim] (c_t, then s_t).
// `scores` is `positions` floats of scratch. A head's result does not depend on the other heads.
void latent_attention(const float* q, int64_t heads, int64_t rank, int64_t shared_dim,
                      const float* rows, int64_t positions, float scale, float* scores,
                      float* context);

}  // namespace md::kernels
