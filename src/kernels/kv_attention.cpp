#include "kernels/kv_attention.h"

#include <algorithm>
#include <vector>

namespace md::kernels {

namespace {

// Rows per task: a task's queries are its rows × the KV head's query heads.
constexpr int64_t kRowsPerTask = 8;

void attend_block(const RowsAttention& a, std::span<const AttentionRow> rows, int64_t g,
                  int64_t first, int64_t last) {
  thread_local std::vector<AttentionQuery> queries;
  const int64_t group = a.heads / a.kv_heads;
  for (int64_t r = first; r < last;) {
    const KvCache* cache = rows[static_cast<std::size_t>(r)].cache;
    queries.clear();
    for (; r < last && rows[static_cast<std::size_t>(r)].cache == cache; ++r) {
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        queries.push_back({a.q + r * a.q_row_stride + h * a.q_head_stride,
                           rows[static_cast<std::size_t>(r)].n_keys,
                           a.out + r * a.out_row_stride + h * a.head_dim});
      }
    }
    cache->attend(g, queries, a.scale);
  }
}

}  // namespace

void attend_rows(const RowsAttention& a, std::span<const AttentionRow> rows, ThreadPool* pool) {
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t blocks = (n + kRowsPerTask - 1) / kRowsPerTask;
  const int64_t tasks = blocks * a.kv_heads;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t block = balanced_row_block(k / a.kv_heads, blocks);
      const int64_t first = block * kRowsPerTask;
      attend_block(a, rows, k % a.kv_heads, first, std::min(n, first + kRowsPerTask));
    }
  };
  int64_t work = 0;
  for (const AttentionRow& row : rows) work += 2 * row.n_keys * a.heads * a.head_dim;
  if (pool != nullptr) {
    pool->parallel_for_work(tasks, work, run);
  } else {
    run(0, tasks);
  }
}

}  // namespace md::kernels
