// Statistical correctness of Sampler: 200k draws per configuration, compared by a chi-square
// goodness-of-fit test at significance 1e-6 with distributions computed here, in double precision,
// directly from the definitions (not from the sampler's code). The seed is fixed, so each test is
// deterministic; a wrong distribution fails by orders of magnitude (see the negative control).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "chi_square.h"
#include "engine/sampler.h"

namespace md::engine {
namespace {

using testing::chi_square_critical;
using testing::chi_square_test;
using testing::chi_square_upper_tail;
using testing::GoodnessOfFit;

constexpr int kVocab = 40;  // above the quickselect sort cutoff, so partitioning is exercised
constexpr int kDraws = 200'000;
constexpr double kSignificance = 1e-6;
constexpr uint64_t kSeed = 0x5eed;

std::vector<float> test_logits() {
  std::vector<float> l(kVocab);
  for (int i = 0; i < kVocab; ++i) l[i] = 2.0f * std::sin(1.3f * i + 0.5f) + 0.03f * i;
  return l;
}

std::vector<int64_t> draw_counts(const SamplingParams& params, const std::vector<float>& logits,
                                 uint64_t seed = kSeed, int draws = kDraws) {
  const auto vocab = static_cast<int32_t>(logits.size());
  Sampler sampler(params, vocab, seed);
  std::vector<int64_t> counts(logits.size(), 0);
  std::vector<float> row;
  for (int64_t pos = 0; pos < draws; ++pos) {
    row = logits;
    ++counts[static_cast<std::size_t>(sampler.sample(row, pos))];
  }
  return counts;
}

// Token ids sorted by probability, highest first, lower id first among equals.
std::vector<int> by_probability(const std::vector<double>& p) {
  std::vector<int> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  return order;
}

void normalise(std::vector<double>& p) {
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= sum;
}

// The distribution the parameters define: softmax(logits / T), then top-k, top-p and min-p, each
// renormalising. Also checks that no boundary is so close that float rounding could flip it.
std::vector<double> expected_distribution(const std::vector<float>& logits,
                                          const SamplingParams& sp) {
  std::vector<double> p(logits.size());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = std::exp(double{logits[i]} / sp.temperature);
  normalise(p);
  const std::vector<int> order = by_probability(p);
  if (sp.top_k > 0) {
    EXPECT_GT(p[order[sp.top_k - 1]] / p[order[sp.top_k]], 1.00001) << "top-k boundary too close";
    for (std::size_t r = sp.top_k; r < order.size(); ++r) p[order[r]] = 0.0;
    normalise(p);
  }
  if (sp.top_p < 1.0f) {
    double before = 0.0;  // mass ranked strictly above the token
    for (int id : order) {
      EXPECT_GT(std::fabs(before - sp.top_p), 1e-5) << "top-p boundary too close";
      const double own = p[id];
      if (before >= sp.top_p) p[id] = 0.0;
      before += own;
    }
    normalise(p);
  }
  if (sp.min_p > 0.0f) {
    const double p_max = *std::max_element(p.begin(), p.end());
    for (double& x : p) {
      if (x == 0.0) continue;
      EXPECT_GT(std::fabs(x / p_max - sp.min_p), 1e-5) << "min-p boundary too close";
      if (x < sp.min_p * p_max) x = 0.0;
    }
    normalise(p);
  }
  return p;
}

GoodnessOfFit check(const SamplingParams& params) {
  const std::vector<float> logits = test_logits();
  return chi_square_test(draw_counts(params, logits), expected_distribution(logits, params),
                         kSignificance);
}

void expect_fits(const SamplingParams& params, int expected_df) {
  const GoodnessOfFit fit = check(params);
  EXPECT_EQ(fit.impossible_draws, 0) << "a truncated-away token was drawn";
  EXPECT_EQ(fit.df, expected_df);
  EXPECT_LT(fit.statistic, fit.critical) << "df " << fit.df;
}

TEST(ChiSquare, CriticalValuesMatchClosedFormsAndTables) {
  // df = 2 is exponential: P(X > x) = exp(-x/2), so x = -2 ln p.
  EXPECT_NEAR(chi_square_critical(2, 1e-6), -2.0 * std::log(1e-6), 1e-6);
  // df = 1 is a squared standard normal: z(5e-7)^2 = 4.891638^2.
  EXPECT_NEAR(chi_square_critical(1, 1e-6), 23.9281, 1e-3);
  // Printed tables (p = 0.001): df 10 -> 29.588, df 30 -> 59.703.
  EXPECT_NEAR(chi_square_critical(10, 1e-3), 29.588, 1e-3);
  EXPECT_NEAR(chi_square_critical(30, 1e-3), 59.703, 1e-3);
  // Even df has a closed form: P(X > x) = exp(-x/2) * sum_{j < df/2} (x/2)^j / j!.
  double term = 1.0;
  double sum = 0.0;
  for (int j = 0; j < 20; ++j, term *= 19.5 / j) sum += term;
  EXPECT_NEAR(chi_square_upper_tail(39.0, 40), std::exp(-19.5) * sum, 1e-12);
}

TEST(SamplerDistribution, TemperatureBelowOne) {
  expect_fits({.temperature = 0.7f}, kVocab - 1);
}

TEST(SamplerDistribution, TemperatureAboveOne) {
  expect_fits({.temperature = 1.5f}, kVocab - 1);
}

TEST(SamplerDistribution, TopK) {
  expect_fits({.temperature = 1.0f, .top_k = 10}, 9);
}

TEST(SamplerDistribution, TopPNeverDrawsExcludedTokensAndRenormalises) {
  const SamplingParams params{.temperature = 1.0f, .top_p = 0.8f};
  const std::vector<double> expected = expected_distribution(test_logits(), params);
  const auto kept = std::count_if(expected.begin(), expected.end(), [](double p) { return p > 0; });
  ASSERT_LT(kept, kVocab / 2) << "top-p should exclude a substantial tail here";
  expect_fits(params, static_cast<int>(kept) - 1);
}

TEST(SamplerDistribution, MinP) {
  const SamplingParams params{.temperature = 1.0f, .min_p = 0.2f};
  const std::vector<double> expected = expected_distribution(test_logits(), params);
  const auto kept = std::count_if(expected.begin(), expected.end(), [](double p) { return p > 0; });
  ASSERT_LT(kept, kVocab / 2);
  expect_fits(params, static_cast<int>(kept) - 1);
}

TEST(SamplerDistribution, CombinedTemperatureTopKTopPMinP) {
  const SamplingParams params{.temperature = 0.8f, .top_k = 16, .top_p = 0.9f, .min_p = 0.1f};
  const std::vector<double> expected = expected_distribution(test_logits(), params);
  const auto kept = std::count_if(expected.begin(), expected.end(), [](double p) { return p > 0; });
  ASSERT_GE(kept, 4);
  expect_fits(params, static_cast<int>(kept) - 1);
}

// 1536 tokens take the selector's histogram path (the 40-token tests take quickselect). Tokens
// expected fewer than 20 times are pooled into one category so that the chi-square approximation
// holds.
TEST(SamplerDistribution, LargeVocabularyWithPooledTail) {
  constexpr int kLargeVocab = 1536;
  constexpr int kLargeDraws = 60'000;
  std::vector<float> logits(kLargeVocab);
  for (int i = 0; i < kLargeVocab; ++i) logits[i] = 6.0f * std::sin(0.37f * i) - 0.004f * i;
  for (const SamplingParams& params :
       {SamplingParams{.temperature = 0.9f}, SamplingParams{.temperature = 1.1f, .top_p = 0.9f}}) {
    SCOPED_TRACE(::testing::Message() << "top_p " << params.top_p);
    const std::vector<double> expected = expected_distribution(logits, params);
    const std::vector<int64_t> observed = draw_counts(params, logits, kSeed, kLargeDraws);
    std::vector<int64_t> pooled_observed(1, 0);
    std::vector<double> pooled_expected(1, 0.0);
    int64_t impossible = 0;
    for (int i = 0; i < kLargeVocab; ++i) {
      if (expected[i] == 0.0) {
        impossible += observed[i];
      } else if (expected[i] * kLargeDraws < 20.0) {
        pooled_observed[0] += observed[i];
        pooled_expected[0] += expected[i];
      } else {
        pooled_observed.push_back(observed[i]);
        pooled_expected.push_back(expected[i]);
      }
    }
    if (pooled_expected[0] == 0.0) {  // nothing to pool
      pooled_expected.erase(pooled_expected.begin());
      pooled_observed.erase(pooled_observed.begin());
    }
    ASSERT_GT(pooled_expected.size(), 30u);
    const GoodnessOfFit fit = chi_square_test(pooled_observed, pooled_expected, kSignificance);
    EXPECT_EQ(impossible, 0);
    EXPECT_LT(fit.statistic, fit.critical) << "df " << fit.df;
  }
}

TEST(SamplerDistribution, NegativeControlRejectsTheWrongTemperature) {
  const std::vector<float> logits = test_logits();
  const GoodnessOfFit fit =
      chi_square_test(draw_counts({.temperature = 1.0f}, logits),
                      expected_distribution(logits, {.temperature = 0.7f}), kSignificance);
  EXPECT_GT(fit.statistic, 10.0 * fit.critical);
}

TEST(SamplerDistribution, NegativeControlRejectsTopPWithoutRenormalisingTheTail) {
  // Top-p draws against the untruncated distribution: the tail is never drawn.
  const std::vector<float> logits = test_logits();
  const GoodnessOfFit fit = chi_square_test(draw_counts({.top_p = 0.8f}, logits),
                                            expected_distribution(logits, {}), kSignificance);
  EXPECT_GT(fit.statistic, fit.critical);
}

TEST(SamplerDistribution, DifferentSeedsGiveTheSameDistribution) {
  const std::vector<float> logits = test_logits();
  const SamplingParams params{.temperature = 1.2f};
  const GoodnessOfFit fit = chi_square_test(draw_counts(params, logits, 12345),
                                            expected_distribution(logits, params), kSignificance);
  EXPECT_LT(fit.statistic, fit.critical);
}

}  // namespace
}  // namespace md::engine
