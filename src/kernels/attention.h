// Causal softmax attention of query vectors over one KV head's cached keys and values, in f32 over
// f32 or bf16 caches. One kernel serves a decode step (one query per head) and a prefill chunk
// (many queries of consecutive positions), and gives every query the same bits either way.
//
// The keys and values are read as tiles of kAttentionTileKeys consecutive positions: a key tile
// holds its keys dimension-major (element d of key τ at d · kAttentionTileKeys + τ mod
// kAttentionTileKeys), so that one vector load brings dimension d of 16 keys and a query's 16
// scores are 16 lanes of fused multiply-adds, with no horizontal sums; a value tile holds its
// values row by row (value τ at (τ mod kAttentionTileKeys) · head_dim).
//
// Numerics, the same on every path (scalar, AVX2, AVX-512) and whatever the queries passed
// together, so a prefill row equals the same row decoded, bitwise:
//   s_τ = scale · (((q_0·k_τ0 + 0) fma q_1·k_τ1) fma ...)   one fma per dimension, in order
//   e_τ = exp_nonpositive(s_τ − max s)                       (kernels/fast_exp.h)
//   Σ   = ((l_0 + l_4) + (l_2 + l_6)) + ((l_1 + l_5) + (l_3 + l_7)) in double, where l_j adds the
//         e_τ with τ ≡ j (mod 8) in increasing τ
//   out_d = ((p_0·v_0d + 0) fma p_1·v_1d ...) with p_τ = e_τ · f32(1 / Σ), one fma per key in order
// Prefill cost: a tile's keys and values are loaded into registers once for up to
// kAttentionQueryGroup queries, and every group of one call passes over a block of 512 keys
// before the next block, so the block is read from L2 by all of them. The scores of the call's
// queries (queries × keys) are the only scratch: callers pass a bounded number of queries
// (kv_attention.h: one KV head of up to 8 rows), never a whole chunk against the context.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace md::kernels {

inline constexpr int64_t kAttentionTileKeys = 16;
// Queries that share each tile load of the score and value passes.
inline constexpr int64_t kAttentionQueryGroup = 4;

// The tiles of one KV head: tile i holds positions [16 i, 16 i + 16), as the layout above says.
// Every tile up to the longest query's keys must be readable in full (unwritten positions may
// hold anything finite; no score of a position beyond a query's keys is used).
template <typename T>
struct KeyValueTiles {
  const T* const* keys = nullptr;
  const T* const* values = nullptr;
};

// One query vector: it attends to positions [0, n_keys) (n_keys >= 1) and writes head_dim
// floats to `out`.
struct AttentionQuery {
  const float* q = nullptr;
  int64_t n_keys = 0;
  float* out = nullptr;
};

// Each query's attention over the tiles. Queries are grouped as given: pass them in position
// order (a prefill chunk's rows), so a group's key counts are close.
void attend_tiles(std::span<const AttentionQuery> queries, const KeyValueTiles<float>& tiles,
                  int64_t head_dim, float scale);
void attend_tiles(std::span<const AttentionQuery> queries, const KeyValueTiles<uint16_t>& tiles,
                  int64_t head_dim, float scale);

// Keys and values held row by row (key τ at τ · stride) copied into the tiles above, zeros past
// the last key: for callers and tests whose keys are not in a KvCache.
template <typename T>
class RegroupedTiles {
 public:
  RegroupedTiles(const T* keys, const T* values, int64_t n_keys, int64_t stride, int64_t head_dim);
  KeyValueTiles<T> view() const { return {key_at_.data(), value_at_.data()}; }

 private:
  std::vector<T> keys_, values_;
  std::vector<const T*> key_at_, value_at_;
};

// out = the attention of q over n_keys keys and values held row by row, key τ at τ · stride:
// regrouped into tiles first, then attend_tiles (so bitwise the tiled cache over the same keys).
void attend(const float* q, const float* keys, const float* values, int64_t n_keys, int64_t stride,
            int64_t head_dim, float scale, float* out);
void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t n_keys,
            int64_t stride, int64_t head_dim, float scale, float* out);

}  // namespace md::kernels
