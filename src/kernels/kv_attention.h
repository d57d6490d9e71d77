// The attention of a step's or a prefill chunk's rows over their sequences' KV caches, every query
// head of every row, split across a thread pool: the reference forwards' attention (the fused
// programs run kernels::KvCache::attend per head as instructions).
#pragma once

#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "kernels/kv_cache.h"

namespace md::kernels {

// Row r's query head h is at q + r · q_row_stride + h · q_head_stride; it attends to positions
// [0, n_keys) of KV head h / (heads / kv_heads) of its cache and writes head_dim floats at
// out + r · out_row_stride + h · head_dim.
struct RowsAttention {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 0;
  const float* q = nullptr;
  int64_t q_row_stride = 0;
  int64_t q_head_stride = 0;
  float* out = nullptr;
  int64_t out_row_stride = 0;
};

struct AttentionRow {
  const KvCache* cache = nullptr;
  int64_t n_keys = 0;
};

// Consecutive rows of the same cache share each tile load (kernels/attention.h), so pass a
// chunk's rows in position order. Every result is bitwise what KvCache::attend gives that query
// alone, whatever the pool's size.
void attend_rows(const RowsAttention& a, std::span<const AttentionRow> rows, ThreadPool* pool);

// Row block k of `blocks`, in an order whose contiguous halves hold equal work: a causal chunk's
// later rows see more keys, and workers take contiguous ranges of tasks first.
constexpr int64_t balanced_row_block(int64_t k, int64_t blocks) {
  return k % 2 == 0 ? k / 2 : blocks - 1 - k / 2;
}

}  // namespace md::kernels
