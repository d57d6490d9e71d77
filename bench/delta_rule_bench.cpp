// One decode step of the gated delta rule (kernels::gated_delta_recurrent) over every value head
// of a layer, for the synthetic 0.8B's shape (16 value heads of 128 × 128 f32 state, 1 MiB), on
// the path MEGADECODE_ISA selects: what the per-row state update costs against the bytes it moves
// (Google Benchmark's bytes_per_second counts the state read and written once), in cache and from
// memory. Compare with bench/README's read bandwidth of one thread.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/gated_delta_rule.h"

namespace {

constexpr int64_t kHeads = 16;
constexpr int64_t kDim = 128;

std::vector<float> random_values(int64_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (float& x : out) x = normal(rng);
  return out;
}

// Every value head of `layers` layers, one after another, as a decode step goes through them: one
// layer's state stays in cache between steps, 384 layers' (384 MiB, past this machine's L3) come
// from memory as in a real step, where the weights streamed since the last step evicted them.
void decode_step(benchmark::State& bench) {
  const int64_t layers = bench.range(0);
  const int64_t matrix = kDim * kDim;
  std::vector<float> state = random_values(layers * kHeads * matrix, 0.05f, 1);
  std::vector<float> q = random_values(kDim, 0.1f, 2), k = random_values(kDim, 0.1f, 3);
  std::vector<float> v = random_values(kHeads * kDim, 1.0f, 4), out(kHeads * kDim);
  float beta = 0.5f, g = -0.01f;
  for (auto _ : bench) {
    for (int64_t h = 0; h < layers * kHeads; ++h) {
      md::kernels::DeltaRuleRows rows{
          q.data(), k.data(), v.data() + h % kHeads * kDim, kDim, kDim, &beta, &g, 1};
      md::kernels::gated_delta_recurrent(state.data() + h * matrix, kDim, kDim, rows,
                                         out.data() + h % kHeads * kDim, kDim);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  bench.SetBytesProcessed(bench.iterations() * 2 * layers * kHeads * matrix *
                          static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(decode_step)->Arg(1)->Arg(384);

}  // namespace

BENCHMARK_MAIN();
