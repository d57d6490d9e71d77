// One layer's keys and values of a sliding window kept in a ring (a drafter's context): position
// p of KV head g lives in slot p % capacity. f32, [kv_heads][capacity][head_dim] for keys and for
// values, so that a head's run of positions is contiguous.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/attention_runs.h"

namespace md::kernels {

struct KvRing {
  float* keys = nullptr;
  float* values = nullptr;
  int64_t capacity = 0;
  int64_t head_dim = 0;

  static constexpr int64_t kMaxRuns = 2;

  int64_t slot(int64_t position) const { return position % capacity; }
  float* key(int64_t head, int64_t position) const {
    return keys + (head * capacity + slot(position)) * head_dim;
  }
  float* value(int64_t head, int64_t position) const {
    return values + (head * capacity + slot(position)) * head_dim;
  }
  // Positions [first, end) of one head (first clamped to 0) as at most two runs in position
  // order (the ring wraps) into `out`; returns the run count. The caller knows they are present.
  int64_t runs(int64_t head, int64_t first, int64_t end, KeyRun* out) const {
    first = std::max<int64_t>(first, 0);
    if (end <= first) return 0;
    const float* k = keys + head * capacity * head_dim;
    const float* v = values + head * capacity * head_dim;
    const int64_t count = end - first, start = slot(first);
    const int64_t head_run = std::min(count, capacity - start);
    out[0] = KeyRun{k + start * head_dim, v + start * head_dim, head_run, head_dim};
    if (count == head_run) return 1;
    out[1] = KeyRun{k, v, count - head_run, head_dim};
    return 2;
  }
};

}  // namespace md::kernels
