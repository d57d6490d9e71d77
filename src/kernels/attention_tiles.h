// The loop nest of kernels/attention.h, shared by its paths: attention_scalar.cpp,
// attention_avx2.cpp and attention_avx512.cpp instantiate it with a traits type V for their
// registers:
//
//   V::Vec, V::kLanes         one register of f32 lanes (kAttentionTileKeys is a multiple)
//   V::zero(), broadcast(x), load(p), load(bf16 p), store(p, v)
//                             load of bf16 widens exactly (the bits shifted up)
//   V::fma(a, b, c)           a · b + c rounded once
//   V::add, sub, mul(a, b), max(a, b), reduce_max(v)
//   V::Mask, at_least, select, pow2, zero_unless
//                             the lane operations of kernels::exp_nonpositive_with
//   V::tiles_for(queries)     key tiles scored together for that many queries (registers)
//
// Every file that instantiates it is compiled with -ffp-contract=off: the only fused operations
// are the fma() calls the numerics of attention.h name, so each path rounds as the others do.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>

#include "kernels/attention.h"
#include "kernels/attention_kernels.h"
#include "kernels/fast_exp.h"
#include "kernels/isa_scratch.h"

namespace md::kernels::attention_tiles {

constexpr int64_t kTile = kAttentionTileKeys;
constexpr int kMaxGroup = static_cast<int>(kAttentionQueryGroup);
// Value-pass accumulators per query: head dimensions handled per pass over the keys.
constexpr int kValueVectors = 4;

// The helpers that are not templates of V have internal linkage: this header is compiled into
// each ISA's file, and an inline function's one linked copy could come from the AVX-512 file.
static inline int64_t tiles_of(int64_t n_keys) {
  return (n_keys + kTile - 1) / kTile;
}

// One cached element as f32 (bf16 widens exactly: it is the f32's top half).
static inline float widened(const float* p) {
  return *p;
}
static inline float widened(const uint16_t* p) {
  return std::bit_cast<float>(static_cast<uint32_t>(*p) << 16);
}

// Scores of NQ queries (q[i], scores[i]) for NT consecutive tiles from `first`: scores[i][τ] =
// scale · the dimension-ordered fma chain of q[i] with key τ.
template <class V, typename T, int NT, int NQ>
void score_tiles(const float* const* q, const T* const* key_tiles, int64_t first, int64_t head_dim,
                 float scale, float* const* scores) {
  using Vec = typename V::Vec;
  constexpr int kPer = static_cast<int>(kTile / V::kLanes);
  Vec acc[NT][NQ][kPer];
  const T* keys[NT];
#pragma GCC unroll 4
  for (int b = 0; b < NT; ++b) {
    keys[b] = key_tiles[first + b];
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) {
#pragma GCC unroll 16
      for (int v = 0; v < kPer; ++v) acc[b][i][v] = V::zero();
    }
  }
  for (int64_t d = 0; d < head_dim; ++d) {
    Vec qd[NQ];
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) qd[i] = V::broadcast(q[i][d]);
#pragma GCC unroll 4
    for (int b = 0; b < NT; ++b) {
#pragma GCC unroll 16
      for (int v = 0; v < kPer; ++v) {
        const Vec k = V::load(keys[b] + d * kTile + v * V::kLanes);
#pragma GCC unroll 4
        for (int i = 0; i < NQ; ++i) acc[b][i][v] = V::fma(qd[i], k, acc[b][i][v]);
      }
    }
  }
  const Vec s = V::broadcast(scale);
#pragma GCC unroll 4
  for (int b = 0; b < NT; ++b) {
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) {
#pragma GCC unroll 16
      for (int v = 0; v < kPer; ++v) {
        V::store(scores[i] + (first + b) * kTile + v * V::kLanes, V::mul(acc[b][i][v], s));
      }
    }
  }
}

// Tiles [first, last) for NQ queries, tiles_for(NQ) at a time.
template <class V, typename T, int NQ>
void score_group(const float* const* q, const T* const* key_tiles, int64_t first, int64_t last,
                 int64_t head_dim, float scale, float* const* scores) {
  constexpr int kStep = V::tiles_for(NQ);
  int64_t b = first;
  for (; b + kStep <= last; b += kStep) {
    score_tiles<V, T, kStep, NQ>(q, key_tiles, b, head_dim, scale, scores);
  }
  for (; b < last; ++b) score_tiles<V, T, 1, NQ>(q, key_tiles, b, head_dim, scale, scores);
}

// Scores in place → p_τ = e_τ / Σ for τ < n, the order attention.h states.
template <class V>
void softmax(float* scores, int64_t n) {
  using Vec = typename V::Vec;
  const int64_t whole = n / V::kLanes * V::kLanes;
  float top = scores[0];
  if (whole > 0) {
    Vec m = V::load(scores);
    for (int64_t t = V::kLanes; t < whole; t += V::kLanes) m = V::max(m, V::load(scores + t));
    top = V::reduce_max(m);
  }
  for (int64_t t = whole; t < n; ++t) top = std::max(top, scores[t]);
  const Vec top_v = V::broadcast(top);
  // The last partial vector is exponentiated (and normalised) whole: the row has room to its
  // tile's end and the score pass wrote it; what lands past n is never read. The vector exp gives
  // each lane the scalar one's bits, and no scalar exp is compiled into this ISA's file (see
  // tiles_of).
  const int64_t padded = (n + V::kLanes - 1) / V::kLanes * V::kLanes;
  for (int64_t t = 0; t < padded; t += V::kLanes) {
    V::store(scores + t, exp_nonpositive_with<V>(V::sub(V::load(scores + t), top_v)));
  }
  double lanes[8] = {};
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) lanes[j] += static_cast<double>(scores[t + j]);
  }
  for (int j = 0; t < n; ++t, ++j) lanes[j] += static_cast<double>(scores[t]);
  const double total = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
                       ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  const Vec inv = V::broadcast(static_cast<float>(1.0 / total));
  for (int64_t u = 0; u < padded; u += V::kLanes) {
    V::store(scores + u, V::mul(V::load(scores + u), inv));
  }
}

// out[i][d0 .. d0 + C·kLanes) continues its fma chain over keys [t0, t1) for NQ queries
// (p[i]: their probabilities, by position).
template <class V, typename T, int NQ, int C>
void value_vectors(const float* const* p, const T* const* value_tiles, int64_t t0, int64_t t1,
                   int64_t head_dim, int64_t d0, float* const* out) {
  using Vec = typename V::Vec;
  Vec acc[NQ][C];
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[i][c] = V::load(out[i] + d0 + c * V::kLanes);
  }
  for (int64_t t = t0; t < t1; ++t) {
    const T* row = value_tiles[t / kTile] + (t % kTile) * head_dim + d0;
    Vec v[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) v[c] = V::load(row + c * V::kLanes);
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) {
      const Vec pt = V::broadcast(p[i][t]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[i][c] = V::fma(pt, v[c], acc[i][c]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) V::store(out[i] + d0 + c * V::kLanes, acc[i][c]);
  }
}

template <class V, typename T, int NQ>
void value_chunks(const float* const* p, const T* const* value_tiles, int64_t t0, int64_t t1,
                  int64_t head_dim, float* const* out) {
  const int64_t vectors = head_dim / V::kLanes;
  int64_t c = 0;
  for (; c + kValueVectors <= vectors; c += kValueVectors) {
    value_vectors<V, T, NQ, kValueVectors>(p, value_tiles, t0, t1, head_dim, c * V::kLanes, out);
  }
  for (; c < vectors; ++c)
    value_vectors<V, T, NQ, 1>(p, value_tiles, t0, t1, head_dim, c * V::kLanes, out);
  // Dimensions past the last whole vector: the same chain, one lane at a time.
  for (int64_t d = vectors * V::kLanes; d < head_dim; ++d) {
    for (int i = 0; i < NQ; ++i) {
      float acc = out[i][d];
      for (int64_t t = t0; t < t1; ++t) {
        acc = std::fma(p[i][t], widened(value_tiles[t / kTile] + (t % kTile) * head_dim + d), acc);
      }
      out[i][d] = acc;
    }
  }
}

// A call's queries (all on one KV head) in groups of up to kMaxGroup that share each tile load.
// Each group keeps its queries' scores (one row per query, every tile its longest query needs).
struct Group {
  const AttentionQuery* queries;
  int size;
  int64_t shortest, longest;  // keys
  float* scores[kMaxGroup];   // size rows of scratch
};

// Calls f.template operator()<NQ>() with NQ = n, for the group sizes 1..kMaxGroup.
template <class F>
void with_size(int n, F&& f) {
  switch (n) {
    case 4:
      f.template operator()<4>();
      break;
    case 3:
      f.template operator()<3>();
      break;
    case 2:
      f.template operator()<2>();
      break;
    default:
      f.template operator()<1>();
      break;
  }
}
static_assert(kMaxGroup == 4, "with_size lists the group sizes");

// Keys a block of the score and value passes covers: every group of the call passes over one
// block before the next, so the block's key and value tiles (128 KB each at head_dim 64 in f32)
// are read from L2 by all the groups instead of from memory by each. Measured on SmolLM2's 4k
// prefill (24 queries per call): a group streaming the whole context alone spent most of its
// time waiting for value rows.
constexpr int64_t kBlockKeys = 512;

template <class V, typename T>
void scores_by_block(std::span<const Group> groups, const KeyValueTiles<T>& tiles, int64_t head_dim,
                     float scale, int64_t longest) {
  for (int64_t b0 = 0; b0 < tiles_of(longest); b0 += kBlockKeys / kTile) {
    for (const Group& g : groups) {
      const int64_t last = std::min(b0 + kBlockKeys / kTile, tiles_of(g.longest));
      if (b0 >= last) continue;
      with_size(g.size, [&]<int NQ>() {
        const float* q[NQ];
        for (int i = 0; i < NQ; ++i) q[i] = g.queries[i].q;
        score_group<V, T, NQ>(q, tiles.keys, b0, last, head_dim, scale, g.scores);
      });
    }
  }
}

// The value chains over keys [k0, k1) for each group: together over the keys all of its
// queries see, one by one beyond.
template <class V, typename T>
void values_in(const Group& g, const KeyValueTiles<T>& tiles, int64_t head_dim, int64_t k0,
               int64_t k1) {
  with_size(g.size, [&]<int NQ>() {
    float* out[NQ];
    for (int i = 0; i < NQ; ++i) out[i] = g.queries[i].out;
    const int64_t together = std::min(k1, g.shortest);
    if (k0 < together) value_chunks<V, T, NQ>(g.scores, tiles.values, k0, together, head_dim, out);
    for (int i = 0; i < NQ; ++i) {
      const int64_t from = std::max(k0, g.shortest), to = std::min(k1, g.queries[i].n_keys);
      if (from < to) value_chunks<V, T, 1>(g.scores + i, tiles.values, from, to, head_dim, out + i);
    }
  });
}

// Scores for every tile each group's longest query needs, block by block; the softmax of each
// query; then the value chains, block by block in increasing key order (each chain continues
// where the previous block left it, so the blocks change no sum).
template <class V, typename T>
void attend(std::span<const AttentionQuery> queries, const KeyValueTiles<T>& tiles,
            int64_t head_dim, float scale) {
  if (queries.empty()) return;
  int64_t longest = 0;
  for (const AttentionQuery& query : queries) longest = std::max(longest, query.n_keys);
  const int64_t stride = tiles_of(longest) * kTile;
  const std::size_t n = queries.size(), group_count = (n + kMaxGroup - 1) / kMaxGroup;
  thread_local IsaScratch<V, float> score_rows;
  thread_local IsaScratch<V, Group> group_list;
  float* const scores = score_rows.at_least(n * static_cast<std::size_t>(stride));
  Group* const groups = group_list.at_least(group_count);
  for (std::size_t k = 0; k < group_count; ++k) {
    const std::size_t first = k * kMaxGroup;
    Group& g = groups[k];
    g = {queries.data() + first,
         static_cast<int>(std::min<std::size_t>(kMaxGroup, n - first)),
         queries[first].n_keys,
         queries[first].n_keys,
         {}};
    for (int j = 0; j < g.size; ++j) {
      g.shortest = std::min(g.shortest, g.queries[j].n_keys);
      g.longest = std::max(g.longest, g.queries[j].n_keys);
      g.scores[j] = scores + static_cast<int64_t>(first + j) * stride;
    }
  }
  const std::span<const Group> all_groups(groups, group_count);
  scores_by_block<V, T>(all_groups, tiles, head_dim, scale, longest);
  for (std::size_t i = 0; i < n; ++i) {
    softmax<V>(scores + static_cast<int64_t>(i) * stride, queries[i].n_keys);
    std::fill(queries[i].out, queries[i].out + head_dim, 0.0f);
  }
  for (int64_t k0 = 0; k0 < longest; k0 += kBlockKeys) {
    for (const Group& g : all_groups) values_in<V, T>(g, tiles, head_dim, k0, k0 + kBlockKeys);
  }
}

template <class V>
inline constexpr AttentionKernels kKernels = {attend<V, float>, attend<V, uint16_t>};

}  // namespace md::kernels::attention_tiles
