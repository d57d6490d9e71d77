#include "kernels/kv_attention.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kernel_test_util.h"

namespace md::kernels {
namespace {

// A chunk of rows of two sequences (the second's rows interleaved with no others, as a batch of
// prefills is), GQA 3: every query head's result is bitwise KvCache::attend of that query alone,
// on one thread and on three.
TEST(KvAttention, RowsEqualEachQueryAloneOnAnyPool) {
  const int64_t kv_heads = 2, heads = 6, dim = 32, capacity = 300;
  for (KvCacheType type : {KvCacheType::kF32, KvCacheType::kBf16}) {
    KvCache a(type, kv_heads, capacity, dim), b(type, kv_heads, capacity, dim);
    for (KvCache* cache : {&a, &b}) {
      for (int64_t p = 0; p < capacity; ++p) {
        for (int64_t g = 0; g < kv_heads; ++g) {
          const auto seed = static_cast<uint64_t>(p * 7 + g + (cache == &b ? 5000 : 0));
          const std::vector<float> k = test::random_floats(dim, seed, 2.0f);
          const std::vector<float> v = test::random_floats(dim, seed + 99);
          cache->write(g, p, k.data(), v.data());
        }
      }
    }
    // 37 rows of a (positions 200..236), then 5 of b (positions 10..14).
    std::vector<AttentionRow> rows;
    for (int64_t p = 200; p < 237; ++p) rows.push_back({&a, p + 1});
    for (int64_t p = 10; p < 15; ++p) rows.push_back({&b, p + 1});
    const auto n = static_cast<int64_t>(rows.size());
    const int64_t q_row = heads * dim + 5;  // a padded row, as q|gate rows are
    const std::vector<float> q = test::random_floats(static_cast<std::size_t>(n * q_row), 1);
    std::vector<float> expected(static_cast<std::size_t>(n * heads * dim));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t h = 0; h < heads; ++h) {
        rows[r].cache->attend(h / 3, rows[r].n_keys, q.data() + r * q_row + h * dim, 0.25f,
                              expected.data() + (r * heads + h) * dim);
      }
    }
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<float> out(expected.size(), -1.0f);
      attend_rows({.heads = heads,
                   .kv_heads = kv_heads,
                   .head_dim = dim,
                   .scale = 0.25f,
                   .q = q.data(),
                   .q_row_stride = q_row,
                   .q_head_stride = dim,
                   .out = out.data(),
                   .out_row_stride = heads * dim},
                  rows, &pool);
      ASSERT_EQ(0, std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)))
          << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace md::kernels
