// Softmax top-k routing with renormalised weights (kernels/moe_routing.h) against a float64
// transcription of the rule, and its order on ties and NaN.
#include "kernels/moe_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace md::kernels {
namespace {

std::vector<ExpertChoice> route(const std::vector<float>& logits, int64_t k) {
  std::vector<float> probs(logits.size());
  std::vector<ExpertChoice> out(static_cast<std::size_t>(k));
  route_softmax_top_k(logits.data(), static_cast<int64_t>(logits.size()), k, probs.data(),
                      out.data());
  return out;
}

// The rule in float64: p = softmax(x); the k largest (lower id first on ties); p_j / Σ chosen p.
std::vector<std::pair<int32_t, double>> route_f64(const std::vector<float>& logits, int64_t k) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p;
  for (float x : logits) p.push_back(std::exp(static_cast<double>(x) - max));
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  double chosen = 0;
  for (int64_t j = 0; j < k; ++j) chosen += p[static_cast<std::size_t>(ids[j])] / sum;
  std::vector<std::pair<int32_t, double>> out;
  for (int64_t j = 0; j < k; ++j) {
    out.push_back({ids[j], p[static_cast<std::size_t>(ids[j])] / sum / chosen});
  }
  return out;
}

TEST(MoeRouting, MatchesTheRuleInFloat64) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t n : {8, 16, 60, 256}) {
    for (int64_t k : {1, 2, 4, 8}) {
      std::vector<float> logits(static_cast<std::size_t>(n));
      for (float& x : logits) x = normal(rng);
      const auto got = route(logits, k);
      const auto want = route_f64(logits, k);
      double total = 0;
      for (int64_t j = 0; j < k; ++j) {
        const auto u = static_cast<std::size_t>(j);
        EXPECT_EQ(got[u].expert, want[u].first) << "n " << n << " k " << k << " rank " << j;
        EXPECT_NEAR(got[u].weight, want[u].second, 2e-6 * want[u].second + 1e-9);
        total += got[u].weight;
      }
      EXPECT_NEAR(total, 1.0, 1e-6);
    }
  }
}

// Negative control: the renormalisation is what makes the weights sum to one; the softmax
// probabilities of the chosen experts alone do not.
TEST(MoeRouting, WeightsAreRenormalisedNotRawProbabilities) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 1.9f};
  const auto got = route(logits, 3);
  EXPECT_EQ(got[0].expert, 1);
  EXPECT_EQ(got[1].expert, 5);
  EXPECT_EQ(got[2].expert, 3);
  // Raw probabilities: e^2, e^1.9, e^1.5 over the sum of all six.
  double all = 0;
  for (float x : logits) all += std::exp(x);
  EXPECT_GT(std::abs(got[0].weight - std::exp(2.0) / all), 0.05);
  EXPECT_NEAR(got[0].weight, std::exp(2.0) / (std::exp(2.0) + std::exp(1.9) + std::exp(1.5)), 1e-6);
}

TEST(MoeRouting, TiesGoToTheLowerIdAndNaNIsNeverChosen) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto got = route({1.0f, 3.0f, 3.0f, 0.0f, 3.0f}, 2);
  EXPECT_EQ(got[0].expert, 1);
  EXPECT_EQ(got[1].expert, 2);
  EXPECT_FLOAT_EQ(got[0].weight, 0.5f);
  got = route({0.0f, nan, 1.0f}, 1);
  // NaN poisons the softmax's sum: every probability is NaN, and the tie rule then picks id 0.
  EXPECT_EQ(got[0].expert, 0);
  got = route({5.0f}, 1);
  EXPECT_EQ(got[0].expert, 0);
  EXPECT_EQ(got[0].weight, 1.0f);
}

// Sigmoid routing with a selection-only bias against the rule in float64: scores σ(m · z), the k
// largest score + bias in selection order (ties to the lower id), weights the chosen scores over
// their sum (+1e-15).
TEST(MoeRouting, SigmoidWithBiasMatchesTheRuleInFloat64) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const int64_t n = 40, k = 6;
  std::vector<float> logits(n), bias(n), scratch(3 * n);
  for (int64_t e = 0; e < n; ++e) {
    logits[static_cast<std::size_t>(e)] = normal(rng);
    bias[static_cast<std::size_t>(e)] = 0.1f * normal(rng);
  }
  std::vector<ExpertChoice> got(k);
  route_sigmoid_bias_top_k(logits.data(), bias.data(), n, k, 1.5f, 1e-15f, scratch.data(),
                           got.data());
  std::vector<double> score(n), selection(n);
  for (int64_t e = 0; e < n; ++e) {
    score[static_cast<std::size_t>(e)] =
        1.0 / (1.0 + std::exp(-1.5 * static_cast<double>(logits[static_cast<std::size_t>(e)])));
    selection[static_cast<std::size_t>(e)] =
        score[static_cast<std::size_t>(e)] + bias[static_cast<std::size_t>(e)];
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return selection[static_cast<std::size_t>(a)] > selection[static_cast<std::size_t>(b)];
  });
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += score[static_cast<std::size_t>(order[j])];
  for (int64_t j = 0; j < k; ++j) {
    EXPECT_EQ(got[static_cast<std::size_t>(j)].expert, order[static_cast<std::size_t>(j)]) << j;
    EXPECT_NEAR(got[static_cast<std::size_t>(j)].weight,
                score[static_cast<std::size_t>(order[j])] / (sum + 1e-15), 1e-6)
        << j;
  }
  // The bias selects but never weighs: an expert lifted into the choice keeps its own score.
  bias[static_cast<std::size_t>(order[k])] += 10.0f;
  route_sigmoid_bias_top_k(logits.data(), bias.data(), n, k, 1.5f, 1e-15f, scratch.data(),
                           got.data());
  EXPECT_EQ(got[0].expert, order[k]);
}

// Kimi K3's router (spec §8.3, §15 test 2): the correction bias changes which experts are chosen
// but not their weights, which are the uncorrected scores renormalised over the choice with
// nothing added to the sum. Negative control: weights from the corrected scores differ.
TEST(MoeRouting, KimisCorrectionBiasSelectsButDoesNotWeigh) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  const int64_t n = 16, k = 4;
  std::vector<float> logits(n), bias(n), zero(n, 0.0f), scratch(3 * n);
  for (int64_t e = 0; e < n; ++e) {
    logits[static_cast<std::size_t>(e)] = normal(rng);
    bias[static_cast<std::size_t>(e)] = 0.3f * normal(rng);
  }
  std::vector<ExpertChoice> plain(k), corrected(k);
  route_sigmoid_bias_top_k(logits.data(), zero.data(), n, k, 1.0f, 0.0f, scratch.data(),
                           plain.data());
  route_sigmoid_bias_top_k(logits.data(), bias.data(), n, k, 1.0f, 0.0f, scratch.data(),
                           corrected.data());
  std::set<int32_t> plain_set, corrected_set;
  for (int64_t j = 0; j < k; ++j) {
    plain_set.insert(plain[static_cast<std::size_t>(j)].expert);
    corrected_set.insert(corrected[static_cast<std::size_t>(j)].expert);
  }
  ASSERT_NE(plain_set, corrected_set);  // the fixture's bias does change the selection
  auto score = [&](int32_t e) { return 1.0 / (1.0 + std::exp(-double{logits[e]})); };
  double sum = 0, biased_sum = 0;
  for (const ExpertChoice& c : corrected)
    sum += score(c.expert), biased_sum += score(c.expert) + bias[c.expert];
  double worst_biased = 0;
  for (const ExpertChoice& c : corrected) {
    EXPECT_NEAR(c.weight, score(c.expert) / sum, 1e-6) << c.expert;
    worst_biased = std::max(worst_biased,
                            std::fabs(c.weight - (score(c.expert) + bias[c.expert]) / biased_sum));
  }
  EXPECT_GT(worst_biased, 1e-3);
}

// The sum epsilon is honoured: with scores of ~2e-16 (logits near −36), Muse's 1e-15 dominates
// the sum, while Kimi's 0 leaves weights that add up to one.
TEST(MoeRouting, TheSumEpsilonIsAddedToTheChosenScores) {
  std::vector<float> logits = {-36.0f, -36.5f, -40.0f}, bias(3, 0.0f), scratch(9);
  std::vector<ExpertChoice> muse(2), kimi(2);
  route_sigmoid_bias_top_k(logits.data(), bias.data(), 3, 2, 1.0f, 1e-15f, scratch.data(),
                           muse.data());
  route_sigmoid_bias_top_k(logits.data(), bias.data(), 3, 2, 1.0f, 0.0f, scratch.data(),
                           kimi.data());
  EXPECT_NEAR(kimi[0].weight + kimi[1].weight, 1.0f, 1e-6f);
  EXPECT_LT(muse[0].weight + muse[1].weight, 0.5f);
  EXPECT_EQ(muse[0].expert, kimi[0].expert);
}

TEST(MoeRouting, SigmoidRoutingTiesGoToTheLowerIdAndNaNIsNeverChosen) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = {nan, 0.5f, 2.0f, 2.0f}, bias(4, 0.0f), scratch(12);
  std::vector<ExpertChoice> got(3);
  route_sigmoid_bias_top_k(logits.data(), bias.data(), 4, 3, 1.0f, 0.0f, scratch.data(),
                           got.data());
  EXPECT_EQ(got[0].expert, 2);
  EXPECT_EQ(got[1].expert, 3);
  EXPECT_EQ(got[2].expert, 1);
  EXPECT_FLOAT_EQ(got[0].weight, got[1].weight);
}

TEST(MoeRouting, SortByExpertKeepsEachWeightWithItsExpert) {
  std::vector<ExpertChoice> choices = {{7, 0.5f}, {2, 0.3f}, {5, 0.2f}};
  sort_by_expert(choices.data(), 3);
  EXPECT_EQ(choices[0].expert, 2);
  EXPECT_EQ(choices[0].weight, 0.3f);
  EXPECT_EQ(choices[1].expert, 5);
  EXPECT_EQ(choices[2].expert, 7);
  EXPECT_EQ(choices[2].weight, 0.5f);
}

}  // namespace
}  // namespace md::kernels
