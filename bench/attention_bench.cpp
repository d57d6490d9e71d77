// One query head's attention over n cached positions: the KV cache's blocks (kernels::KvCache,
// 16 positions a block from the pool) against the same keys and values held in one run
// (kernels::attend), for the default model's head shape (head_dim 64; f32 as Llama keeps it, and
// bf16). What the paged cache costs at long contexts: run with --benchmark_repetitions and
// compare the medians of a pair (this VM's noise is ±15 %).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_cache.h"

namespace {

using md::kernels::KvCache;
using md::kernels::KvCacheType;

constexpr int64_t kDim = 64;

KvCache filled(KvCacheType type, int64_t positions) {
  KvCache cache(type, 1, positions, kDim);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> k(kDim), v(kDim);
  for (int64_t p = 0; p < positions; ++p) {
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    cache.write(0, p, k.data(), v.data());
  }
  return cache;
}

std::vector<float> query() {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> q(kDim);
  for (float& x : q) x = normal(rng);
  return q;
}

void blocks(benchmark::State& state, KvCacheType type) {
  const int64_t n = state.range(0);
  const KvCache cache = filled(type, n);
  std::vector<float> q = query(), scores(static_cast<std::size_t>(n)), out(kDim);
  for (auto _ : state) {
    cache.attend(0, n, q.data(), 0.125f, scores.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void contiguous_f32(benchmark::State& state) {
  const int64_t n = state.range(0);
  const KvCache cache = filled(KvCacheType::kF32, n);
  const std::vector<float> keys = cache.keys_f32(), values = cache.values_f32();
  std::vector<float> q = query(), scores(static_cast<std::size_t>(n)), out(kDim);
  for (auto _ : state) {
    md::kernels::attend(q.data(), keys.data(), values.data(), n, kDim, kDim, 0.125f, scores.data(),
                        out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void contiguous_bf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<uint16_t> keys(static_cast<std::size_t>(n * kDim), 0x3f80), values = keys;
  std::vector<float> q = query(), scores(static_cast<std::size_t>(n)), out(kDim);
  for (auto _ : state) {
    md::kernels::attend(q.data(), keys.data(), values.data(), n, kDim, kDim, 0.125f, scores.data(),
                        out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

BENCHMARK_CAPTURE(blocks, f32, KvCacheType::kF32)->Arg(256)->Arg(4096)->Arg(32768);
BENCHMARK(contiguous_f32)->Arg(256)->Arg(4096)->Arg(32768);
BENCHMARK_CAPTURE(blocks, bf16, KvCacheType::kBf16)->Arg(256)->Arg(4096)->Arg(32768);
BENCHMARK(contiguous_bf16)->Arg(256)->Arg(4096)->Arg(32768);

}  // namespace

BENCHMARK_MAIN();
