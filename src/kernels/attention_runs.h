// The attention of one query head over keys held in several runs (a sliding-window ring's one or
// two pieces and a draft block's own rows), softmax in f32 over all of them together.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

namespace md::kernels {

// `count` keys (and values) starting at `keys`/`values`, key τ at τ · stride.
struct KeyRun {
  const float* keys = nullptr;
  const float* values = nullptr;
  int64_t count = 0;
  int64_t stride = 0;
};

// out = Σ softmax(scale · q·k) · v over every key of every run, keys `key_dim` wide and values
// `value_dim` wide. `scores` is scratch for the total key count. With no keys at all, out is zero.
void attend_runs(const float* q, std::span<const KeyRun> runs, int64_t key_dim, int64_t value_dim,
                 float scale, float* scores, float* out);
// Keys and values of one width.
inline void attend_runs(const float* q, std::span<const KeyRun> runs, int64_t head_dim, float scale,
                        float* scores, float* out) {
  attend_runs(q, runs, head_dim, head_dim, scale, scores, out);
}

// The block rows [first, last] that row t of a draft block of `rows` attends to: every row within
// the window, before and after t, as the block is bidirectional (only rows up to t if causal).
struct BlockRows {
  int64_t first = 0;
  int64_t last = 0;
};
inline BlockRows visible_block_rows(int64_t t, int64_t rows, int64_t window, bool causal = false) {
  return {std::max<int64_t>(0, t - window + 1), causal ? t : std::min(rows - 1, t + window - 1)};
}

}  // namespace md::kernels
