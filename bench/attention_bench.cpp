// One KV head's attention over n cached positions (kernels::KvCache, the default model's head
// shape: head_dim 64, three query heads per KV head), f32 and bf16 caches:
//   decode   one query over n keys (a decode step's task)
//   prefill  the last 256 rows of an n-position prompt, 3 heads each, in calls of the second
//            argument's rows (kernels/kv_attention.cpp hands a task 8 rows of one KV head; the
//            rows of a call share each tile load)
// Items are (query, key) pairs, so the two read alike: what a score costs on each. Run with
// --benchmark_repetitions and compare medians (this VM's noise is ±15 %).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_cache.h"

namespace {

using md::kernels::AttentionQuery;
using md::kernels::KvCache;
using md::kernels::KvCacheType;

constexpr int64_t kDim = 64;
constexpr int64_t kGroup = 3;
constexpr int64_t kChunk = 256;

std::vector<float> normal_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(n);
  for (float& x : values) x = normal(rng);
  return values;
}

KvCache filled_cache(KvCacheType type, int64_t n) {
  KvCache cache(type, 1, n, kDim);
  const std::vector<float> rows = normal_floats(static_cast<std::size_t>(2 * n * kDim), 3);
  for (int64_t p = 0; p < n; ++p) {
    cache.write(0, p, rows.data() + 2 * p * kDim, rows.data() + (2 * p + 1) * kDim);
  }
  return cache;
}

template <KvCacheType kType>
void decode(benchmark::State& state) {
  const int64_t n = state.range(0);
  const KvCache cache = filled_cache(kType, n);
  std::vector<float> q = normal_floats(kDim, 5), out(kDim);
  for (auto _ : state) {
    cache.attend(0, n, q.data(), 0.125f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

template <KvCacheType kType>
void prefill(benchmark::State& state) {
  const int64_t n = state.range(0);
  const KvCache cache = filled_cache(kType, n);
  const int64_t rows = std::min(n, kChunk);
  std::vector<float> q = normal_floats(static_cast<std::size_t>(rows * kGroup * kDim), 5);
  std::vector<float> out(q.size());
  std::vector<AttentionQuery> queries;
  int64_t pairs = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < kGroup; ++h) {
      const int64_t at = (r * kGroup + h) * kDim, n_keys = n - rows + r + 1;
      queries.push_back({q.data() + at, n_keys, out.data() + at});
      pairs += n_keys;
    }
  }
  const auto per_call = static_cast<std::size_t>(state.range(1) * kGroup);
  for (auto _ : state) {
    for (std::size_t first = 0; first < queries.size(); first += per_call) {
      const std::size_t count = std::min(per_call, queries.size() - first);
      cache.attend(0, std::span<const AttentionQuery>(queries).subspan(first, count), 0.125f);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * pairs);
}

BENCHMARK_TEMPLATE(decode, KvCacheType::kF32)->Arg(256)->Arg(4096)->Arg(32768);
BENCHMARK_TEMPLATE(decode, KvCacheType::kBf16)->Arg(256)->Arg(4096)->Arg(32768);
BENCHMARK_TEMPLATE(prefill, KvCacheType::kF32)->ArgsProduct({{256, 4096, 8192}, {8, 32}});
BENCHMARK_TEMPLATE(prefill, KvCacheType::kBf16)->ArgsProduct({{256, 4096, 8192}, {8, 32}});

}  // namespace

BENCHMARK_MAIN();
