#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"
#include "engine/counter_rng.h"

namespace md::engine {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_logits(int n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::vector<float> l(static_cast<std::size_t>(n));
  for (float& x : l) x = scale * (static_cast<float>(rng()) / 4294967296.0f * 2.0f - 1.0f);
  return l;
}

std::vector<int32_t> sample_run(const SamplingParams& params, const std::vector<float>& logits,
                                uint64_t seed, int count) {
  Sampler sampler(params, static_cast<int32_t>(logits.size()), seed);
  std::vector<int32_t> out;
  for (int pos = 0; pos < count; ++pos) {
    std::vector<float> row = logits;
    out.push_back(sampler.sample(row, pos));
  }
  return out;
}

TEST(CounterRng, IsAPureFunctionOfSeedAndPositionInTheUnitInterval) {
  EXPECT_EQ(uniform_at(7, 3), uniform_at(7, 3));
  EXPECT_NE(uniform_at(7, 3), uniform_at(7, 4));
  EXPECT_NE(uniform_at(7, 3), uniform_at(8, 3));
  double sum = 0.0;
  for (int64_t pos = 0; pos < 100000; ++pos) {
    const double u = uniform_at(42, pos);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);  // 5 standard errors
}

TEST(SamplerReproducibility, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const auto logits = random_logits(1000, 1);
  const SamplingParams params{.temperature = 1.0f, .top_p = 0.95f};
  const auto a = sample_run(params, logits, 99, 200);
  EXPECT_EQ(a, sample_run(params, logits, 99, 200));
  EXPECT_NE(a, sample_run(params, logits, 100, 200));
}

TEST(SamplerReproducibility, TokenAtAPositionDoesNotDependOnCallOrder) {
  const auto logits = random_logits(500, 2);
  const SamplingParams params{.temperature = 0.9f, .top_k = 50};
  Sampler warm(params, 500, 5);
  for (int pos = 0; pos < 5; ++pos) {
    auto row = logits;
    warm.sample(row, pos);
  }
  Sampler cold(params, 500, 5);
  for (int64_t pos : {5, 9, 1000000007}) {
    auto r1 = logits;
    auto r2 = logits;
    const int32_t cold_token = cold.sample(r1, pos);
    EXPECT_EQ(warm.sample(r2, pos), cold_token) << "position " << pos;
  }
}

TEST(SamplerGreedy, TemperatureZeroIsArgmaxWithTiesToTheLowestId) {
  Sampler sampler({.temperature = 0.0f}, 6, 1);
  std::vector<float> row = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, 3.0f};
  for (int64_t pos = 0; pos < 20; ++pos) {
    auto r = row;
    EXPECT_EQ(sampler.sample(r, pos), 1);
  }
}

TEST(SamplerGreedy, TinyTemperatureIsGreedyWithoutDividing) {
  Sampler sampler({.temperature = 1e-6f}, 3, 1);
  std::vector<float> row = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                            0.0f};
  EXPECT_EQ(sampler.sample(row, 0), 0);
}

TEST(SamplerGreedy, TopKOneIsArgmaxAtAnyTemperature) {
  const auto logits = random_logits(1000, 3);
  const int32_t best = Sampler::argmax(logits);
  for (int32_t token : sample_run({.temperature = 2.0f, .top_k = 1}, logits, 11, 50)) {
    EXPECT_EQ(token, best);
  }
}

// top_p 0 keeps only the top token (the API contract), at any temperature.
TEST(SamplerGreedy, TopPZeroIsArgmaxAtAnyTemperature) {
  const auto logits = random_logits(1000, 3);
  const int32_t best = Sampler::argmax(logits);
  for (int32_t token : sample_run({.temperature = 2.0f, .top_p = 0.0f}, logits, 11, 50)) {
    EXPECT_EQ(token, best);
  }
}

TEST(SamplerGreedy, ArgmaxTreatsNaNAsNegativeInfinity) {
  EXPECT_EQ(Sampler::argmax(std::vector<float>{kNaN, 1.0f, kNaN, 2.0f, kNaN}), 3);
  EXPECT_EQ(Sampler::argmax(std::vector<float>{kNaN, -kInf, 5.0f}), 2);
  EXPECT_EQ(Sampler::argmax(std::vector<float>{kNaN, kNaN}), 0);
  EXPECT_EQ(Sampler::argmax(std::vector<float>{1.0f, kInf, kInf}), 1);
  EXPECT_THROW(Sampler::argmax(std::vector<float>{}), md::Error);
}

TEST(SamplerRandom, NeverDrawsNaNOrNegativeInfinityAndSharesInfinityEqually) {
  Sampler sampler({.temperature = 1.0f}, 5, 3);
  int first = 0;
  for (int64_t pos = 0; pos < 2000; ++pos) {
    std::vector<float> row = {kNaN, kInf, -kInf, kInf, 1e30f};
    const int32_t t = sampler.sample(row, pos);
    ASSERT_TRUE(t == 1 || t == 3) << t;
    first += t == 1;
  }
  EXPECT_NEAR(first, 1000, 150);
  Sampler small({.temperature = 1.0f}, 3, 3);
  std::vector<float> hopeless = {kNaN, -kInf, kNaN};
  EXPECT_EQ(small.sample(hopeless, 0), 0);
}

TEST(SamplerRandom, TopPOnALargeVocabularyStaysInTheNucleus) {
  // 50k tokens exercise select_prefix's partitioning, not just its sorted tail.
  const auto logits = random_logits(50000, 4, 8.0f);
  std::vector<std::pair<double, int>> ranked;
  double z = 0.0;
  for (int i = 0; i < 50000; ++i) z += std::exp(double{logits[i]});
  for (int i = 0; i < 50000; ++i) ranked.emplace_back(std::exp(double{logits[i]}) / z, i);
  std::sort(ranked.begin(), ranked.end(), [](auto a, auto b) { return a.first > b.first; });
  std::vector<bool> in_nucleus(50000, false);
  double before = 0.0;
  for (const auto& [p, id] : ranked) {
    if (before >= 0.5) break;
    in_nucleus[static_cast<std::size_t>(id)] = true;
    before += p;
  }
  for (int32_t t : sample_run({.top_p = 0.5f}, logits, 8, 300)) {
    EXPECT_TRUE(in_nucleus[static_cast<std::size_t>(t)]) << t;
  }
}

TEST(SamplerPenalties, MatchHandComputedLogits) {
  // rep = 2 on prompt + generated {0, 1, 2, 4}: positive logits halve, negative ones double.
  // Generated counts: token 2 twice, token 4 once; presence 0.5, frequency 0.25.
  Sampler sampler(
      {.presence_penalty = 0.5f, .frequency_penalty = 0.25f, .repetition_penalty = 2.0f}, 6, 1);
  sampler.observe_prompt(std::vector<int32_t>{0, 1, 0});
  sampler.observe_generated(2);
  sampler.observe_generated(2);
  sampler.observe_generated(4);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, -3.0f, 4.0f, 1.0f};
  sampler.apply_penalties(logits);
  // 0: 2/2. 1: -1*2. 2: 0.5/2 - (2*0.25 + 0.5). 3, 5: untouched. 4: 4/2 - (0.25 + 0.5).
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, -0.75f, -3.0f, 1.25f, 1.0f}));
}

TEST(SamplerPenalties, PresenceAndFrequencyIgnoreThePrompt) {
  Sampler sampler({.presence_penalty = 1.0f, .frequency_penalty = 1.0f}, 3, 1);
  sampler.observe_prompt(std::vector<int32_t>{0, 0, 1});
  sampler.observe_generated(1);
  std::vector<float> logits = {1.0f, 1.0f, 1.0f};
  sampler.apply_penalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -1.0f, 1.0f}));
}

TEST(SamplerPenalties, AreAppliedBeforeGreedySelection) {
  Sampler sampler({.temperature = 0.0f, .repetition_penalty = 3.0f}, 3, 1);
  sampler.observe_generated(0);
  std::vector<float> logits = {3.0f, 2.0f, 0.0f};
  EXPECT_EQ(sampler.sample(logits, 0), 1);  // 3/3 = 1 < 2
}

TEST(SamplerErrors, RejectsBadInputs) {
  EXPECT_THROW(Sampler({.top_p = -1.0f}, 10, 1), md::Error);
  EXPECT_THROW(Sampler({}, 0, 1), md::Error);
  Sampler sampler({}, 10, 1);
  EXPECT_THROW(sampler.observe_prompt(std::vector<int32_t>{1, 10}), md::Error);
  EXPECT_THROW(sampler.observe_generated(-1), md::Error);
  std::vector<float> short_row(9, 0.0f);
  EXPECT_THROW(sampler.sample(short_row, 0), md::Error);
}

}  // namespace
}  // namespace md::engine
