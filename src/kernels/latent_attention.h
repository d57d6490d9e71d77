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
#pragma once

#include <cstdint>

namespace md::kernels {

// Positions [0, positions) of one sequence's latent cache: c_t at latents + t·latent_stride,
// s_t at shared + t·shared_stride.
struct LatentCache {
  const float* latents = nullptr;
  int64_t latent_stride = 0;
  const float* shared = nullptr;
  int64_t shared_stride = 0;
  int64_t positions = 0;
};

// For heads [0, heads): q_latent [heads][rank], q_shared [heads][shared_dim] in, context
// [heads][rank] out. Per head the scores are formed in position order (each a rank-wide then a
// shared-wide sum in increasing index, added), softmax with the maximum subtracted and the sum
// in position order, then the context summed in position order. `scores` is `positions` floats
// of scratch. A head's result does not depend on the other heads.
void latent_attention(const float* q_latent, const float* q_shared, int64_t heads, int64_t rank,
                      int64_t shared_dim, const LatentCache& cache, float scale, float* scores,
                      float* context);

}  // namespace md::kernels
