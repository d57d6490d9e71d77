// Kimi K3's attention residuals (docs/models/kimi-k3-dspark.md §5.2): a layer has no residual
// sum; every sublayer input is a learned softmax mixture over the stored blocks and the running
// prefix, and the per-token timeline of pushes decides which candidates a mix sees.
#pragma once

#include <cstdint>

namespace md::kernels {

// Mix(blocks, prefix, w): candidates v_0 … v_{n−1} (the blocks in push order) and v_n (the
// prefix), `count` = n + 1 of them, each `width` floats. In f32:
//   score_i = (Σ_c v_i[c]·w[c]) · rsqrt(mean_c(v_i[c]²) + eps)   (sums in increasing c)
//   p = softmax(score) (the maximum subtracted, the sum in candidate order)
//   out[c] = Σ_i p_i·v_i[c] (in candidate order)
// With one candidate out equals it exactly (p = 1). `scores` is `count` floats of scratch.
void residual_mix(const float* const* candidates, int64_t count, const float* w, int64_t width,
                  float eps, float* scores, float* out);

// The timeline of one token through L layers with block size B (§5.2): blocks are pushed at the
// start of layers 0, B, 2B, … (the pre-attention prefix), so
// - the attention mix of layer l sees (l − 1) div B + 1 stored blocks (none at l = 0),
// - the MLP mix of layer l sees l div B + 1 stored blocks,
// - the final mix sees (L − 1) div B + 1,
// each plus the prefix. Stored blocks needed in all: ceil(L / B).
inline int64_t attention_mix_blocks(int64_t layer, int64_t block_size) {
  return layer == 0 ? 0 : (layer - 1) / block_size + 1;
}
inline int64_t mlp_mix_blocks(int64_t layer, int64_t block_size) {
  return layer / block_size + 1;
}
inline int64_t final_mix_blocks(int64_t layers, int64_t block_size) {
  return (layers - 1) / block_size + 1;
}
// Whether layer l pushes the prefix as a new block before its attention (l mod B = 0).
inline bool pushes_block(int64_t layer, int64_t block_size) {
  return layer % block_size == 0;
}

}  // namespace md::kernels
