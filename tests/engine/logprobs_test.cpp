#include "engine/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"

namespace md::engine {
namespace {

std::vector<double> reference_log_softmax(const std::vector<float>& l) {
  double m = -INFINITY;
  for (float x : l) m = std::max(m, double{x});
  double s = 0.0;
  for (float x : l) s += std::exp(double{x} - m);
  std::vector<double> out;
  for (float x : l) out.push_back(double{x} - m - std::log(s));
  return out;
}

std::vector<float> random_logits(std::size_t n, uint32_t seed, float offset) {
  std::mt19937 rng(seed);
  std::vector<float> l(n);
  for (float& x : l) x = offset + 20.0f * static_cast<float>(rng()) / 4294967296.0f - 10.0f;
  return l;
}

TEST(Logprobs, MatchDoublePrecisionLogSoftmaxIncludingHugeLogits) {
  for (float offset : {0.0f, 1000.0f, -5000.0f}) {
    const auto logits = random_logits(10000, 7, offset);
    const auto ref = reference_log_softmax(logits);
    for (int32_t t : {0, 1, 4567, 9999}) EXPECT_NEAR(logprob_of(logits, t), ref[t], 1e-6);
    const auto top = top_logprobs(logits, 20);
    ASSERT_EQ(top.size(), 20u);
    for (std::size_t i = 0; i < top.size(); ++i) {
      EXPECT_NEAR(top[i].logprob, ref[static_cast<std::size_t>(top[i].token)], 1e-6);
      if (i > 0) {
        EXPECT_GE(top[i - 1].logprob, top[i].logprob);
      }
    }
    // Nothing outside the top 20 beats the 20th.
    for (std::size_t t = 0; t < ref.size(); ++t) {
      bool listed = false;
      for (const auto& x : top) listed |= x.token == static_cast<int32_t>(t);
      if (!listed) {
        EXPECT_LE(ref[t], double{top.back().logprob} + 1e-6);
      }
    }
  }
}

TEST(Logprobs, TiesGoToTheLowerIdAndKIsClamped) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  const auto top = top_logprobs(logits, 10);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_EQ(top[1].token, 2);
  EXPECT_EQ(top[2].token, 3);
  EXPECT_TRUE(top_logprobs(logits, 0).empty());
}

TEST(Logprobs, NaNIsImpossibleAndBadArgumentsThrow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {0.0f, nan, 0.0f};
  EXPECT_NEAR(logprob_of(logits, 0), std::log(0.5), 1e-7);
  EXPECT_EQ(logprob_of(logits, 1), -std::numeric_limits<float>::infinity());
  EXPECT_THROW(logprob_of(logits, 3), md::Error);
  EXPECT_THROW(top_logprobs(logits, -1), md::Error);
  EXPECT_THROW(top_logprobs(std::vector<float>{}, 1), md::Error);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(logprob_of(std::vector<float>{-inf, -inf}, 0), -inf);
}

}  // namespace
}  // namespace md::engine
