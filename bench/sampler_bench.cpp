// Sampler cost per token on a 248,320-token vocabulary (Qwen3.8's) with random logits: greedy,
// plain temperature, top-k 40, top-p 0.9 and all truncations combined, one core. Logits are
// N(0, 2.5^2)-like, so top-p 0.9 keeps a large share of the vocabulary: close to the worst case.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace {

using md::engine::Sampler;
using md::engine::SamplingParams;

constexpr int32_t kVocab = 248'320;

const std::vector<float>& logits() {
  static const std::vector<float> row = [] {
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 2.5f);
    std::vector<float> l(kVocab);
    for (float& x : l) x = normal(rng);
    return l;
  }();
  return row;
}

// `history` tokens of prompt and as many generated ones feed the penalties.
void run(benchmark::State& state, const SamplingParams& params, int32_t history = 0) {
  Sampler sampler(params, kVocab, 42);
  std::mt19937 rng(7);
  std::vector<int32_t> prompt(static_cast<std::size_t>(history));
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % kVocab);
  sampler.observe_prompt(prompt);
  for (int32_t i = 0; i < history; ++i)
    sampler.observe_generated(static_cast<int32_t>(rng() % kVocab));
  std::vector<float> row(logits().size());
  int64_t position = 0;
  for (auto _ : state) {
    state.PauseTiming();
    row = logits();
    state.ResumeTiming();
    benchmark::DoNotOptimize(sampler.sample(row, position++));
  }
}

void BM_Greedy(benchmark::State& s) {
  run(s, {.temperature = 0.0f});
}
void BM_Temperature(benchmark::State& s) {
  run(s, {.temperature = 0.8f});
}
void BM_TopK40(benchmark::State& s) {
  run(s, {.temperature = 0.8f, .top_k = 40});
}
void BM_TopP09(benchmark::State& s) {
  run(s, {.temperature = 0.8f, .top_p = 0.9f});
}
void BM_Combined(benchmark::State& s) {
  run(s, {.temperature = 0.8f,
          .top_k = 50,
          .top_p = 0.9f,
          .min_p = 0.05f,
          .presence_penalty = 0.5f,
          .repetition_penalty = 1.1f});
}

BENCHMARK(BM_Greedy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Temperature)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopK40)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopP09)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Combined)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
