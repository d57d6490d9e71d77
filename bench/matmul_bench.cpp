// Weight-streaming speed of the bf16 matmul kernel, as a fraction of this machine's measured
// memory read bandwidth (same run): decode at batch 1 is bound by it.
#include <benchmark/benchmark.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace {

constexpr int64_t kRows = 8192, kCols = 4096;  // 64 MiB of bf16: far beyond the caches

std::vector<uint16_t> make_weights() {
  std::vector<uint16_t> w(static_cast<std::size_t>(kRows * kCols));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (uint16_t& bits : w) bits = md::f32_to_bf16(normal(rng));
  return w;
}

const std::vector<uint16_t>& weights() {
  static const std::vector<uint16_t> w = make_weights();
  return w;
}

// Read bandwidth: summing 64-bit words of a buffer of the same size.
void BM_MemoryRead(benchmark::State& state) {
  const std::vector<uint16_t>& w = weights();
  const auto* words = reinterpret_cast<const uint64_t*>(w.data());
  std::size_t n = w.size() * sizeof(uint16_t) / sizeof(uint64_t);
  for (auto _ : state) {
    uint64_t sum = std::accumulate(words, words + n, uint64_t{0});
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size() * sizeof(uint16_t)));
}
BENCHMARK(BM_MemoryRead)->Unit(benchmark::kMillisecond);

void BM_MatmulBf16(benchmark::State& state) {
  const std::vector<uint16_t>& w = weights();
  int64_t rows = state.range(0);
  md::ThreadPool pool(static_cast<int>(state.range(1)));
  std::vector<float> x(static_cast<std::size_t>(rows * kCols), 0.5f);
  std::vector<float> y(static_cast<std::size_t>(rows * kRows));
  md::kernels::Bf16Matrix matrix{w.data(), kRows, kCols};
  for (auto _ : state) {
    md::kernels::matmul(matrix, x.data(), rows, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size() * sizeof(uint16_t)));
  state.counters["GFLOP/s"] = benchmark::Counter(
      static_cast<double>(2 * kRows * kCols * rows) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MatmulBf16)->ArgsProduct({{1, 8}, {1, 2}})->ArgNames({"rows", "threads"})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
