// Causal attention of one query vector over a run of cached keys and values (one KV head),
// softmax in f32. The cache may hold f32 or bf16 elements.
#pragma once

#include <cstdint>

namespace md::kernels {

// out = Σ_τ softmax_τ(scale · q·K[τ]) · V[τ] over τ in [0, n_keys). Row τ of K and V starts at
// τ·stride. `scores` is scratch of n_keys floats.
void attend(const float* q, const float* keys, const float* values, int64_t n_keys, int64_t stride,
            int64_t head_dim, float scale, float* scores, float* out);
void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t n_keys,
            int64_t stride, int64_t head_dim, float scale, float* scores, float* out);

// The same over keys held in fixed-size blocks (kernels::KvCache): key τ is row τ mod block_keys
// of key_blocks[τ / block_keys], rows head_dim apart; values alike. Bitwise equal to attend() over
// the same keys held in one run.
void attend_blocks(const float* q, const float* const* key_blocks, const float* const* value_blocks,
                   int64_t block_keys, int64_t n_keys, int64_t head_dim, float scale, float* scores,
                   float* out);
void attend_blocks(const float* q, const uint16_t* const* key_blocks,
                   const uint16_t* const* value_blocks, int64_t block_keys, int64_t n_keys,
                   int64_t head_dim, float scale, float* scores, float* out);

#if defined(__x86_64__)
// The AVX2 form of the bf16 value sum's inner loop, out[d] += p · v[d] (attention_avx2.cpp):
// attend() uses it on the avx2 and avx512 paths; bitwise the portable loop (tests).
void add_scaled_bf16_avx2(float p, const uint16_t* v, float* out, int64_t n);
#endif

}  // namespace md::kernels
