// One query head's attention over n cached positions: the KV cache's blocks (kernels::KvCache,
// 16 positions a block from the pool) against the same keys and values held in one run
// (kernels::attend), for the default model's head shape (head_dim 64; f32 as Llama keeps it, and
// bf16). What the paged cache costs at long contexts: run with --benchmark_repetitions and
// compare the medians of a pair (this VM's noise is ±15 %).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
#include "kernels/attention.h"
#include "kernels/kv_cache.h"

namespace {

using md::kernels::KvCache;
using md::kernels::KvCacheType;

constexpr int64_t kDim = 64;

// The keys and values of `positions` positions, one row of kDim each, in write order.
struct Rows {
  std::vector<float> keys, values;
};
Rows random_rows(int64_t positions) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  Rows rows;
  for (int64_t p = 0; p < positions * kDim; p += kDim) {
    for (int64_t d = 0; d < kDim; ++d) rows.keys.push_back(normal(rng));
    for (int64_t d = 0; d < kDim; ++d) rows.values.push_back(normal(rng));
  }
  return rows;
}

std::vector<float> query() {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> q(kDim);
  for (float& x : q) x = normal(rng);
  return q;
}

// One run of keys and one of values as the cache stores them (f32, or rounded to bf16).
template <typename T>
std::vector<T> stored(const std::vector<float>& values) {
  if constexpr (std::is_same_v<T, float>) {
    return values;
  } else {
    std::vector<T> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = md::f32_to_bf16(values[i]);
    return out;
  }
}

template <typename T>
void blocks(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Rows rows = random_rows(n);
  KvCache cache(std::is_same_v<T, float> ? KvCacheType::kF32 : KvCacheType::kBf16, 1, n, kDim);
  for (int64_t p = 0; p < n; ++p) {
    cache.write(0, p, rows.keys.data() + p * kDim, rows.values.data() + p * kDim);
  }
  std::vector<float> q = query(), scores(static_cast<std::size_t>(n)), out(kDim);
  for (auto _ : state) {
    cache.attend(0, n, q.data(), 0.125f, scores.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

template <typename T>
void contiguous(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Rows rows = random_rows(n);
  const std::vector<T> keys = stored<T>(rows.keys), values = stored<T>(rows.values);
  std::vector<float> q = query(), scores(static_cast<std::size_t>(n)), out(kDim);
  for (auto _ : state) {
    md::kernels::attend(q.data(), keys.data(), values.data(), n, kDim, kDim, 0.125f, scores.data(),
                        out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

BENCHMARK_TEMPLATE(blocks, float)->Arg(256)->Arg(4096)->Arg(32768);
BENCHMARK_TEMPLATE(contiguous, float)->Arg(256)->Arg(4096)->Arg(32768);
BENCHMARK_TEMPLATE(blocks, uint16_t)->Arg(256)->Arg(4096)->Arg(32768);
BENCHMARK_TEMPLATE(contiguous, uint16_t)->Arg(256)->Arg(4096)->Arg(32768);

}  // namespace

BENCHMARK_MAIN();
