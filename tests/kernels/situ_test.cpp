// SiTU (kernels/situ.h, spec §8.1) against its formula in float64 over a range that saturates
// both tanh factors; the clamped "SiTUv2" and swapped inputs are told apart.
#include "kernels/situ.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/gated_activation.h"

namespace md::kernels {
namespace {

double formula(double g, double u, double beta, double linear_beta) {
  return beta * std::tanh(g / beta) / (1 + std::exp(-g)) * linear_beta * std::tanh(u / linear_beta);
}

TEST(Situ, MatchesTheFormula) {
  const SituParams params;  // K3's 4 / 25
  double worst = 0;
  for (double g = -40; g <= 40; g += 0.37) {
    for (double u = -90; u <= 90; u += 1.13) {
      const double want = formula(g, u, 4, 25);
      const float got = situ(static_cast<float>(g), static_cast<float>(u), params);
      worst = std::max(worst, std::fabs(got - want) / std::max(std::fabs(want), 1e-30));
    }
  }
  EXPECT_LE(worst, 2e-6);
  EXPECT_NEAR(situ(60.0f, 1000.0f, params), 100.0f, 1e-4);  // both caps reached: 4 · 25
  EXPECT_EQ(situ(0.0f, 5.0f, params), 0.0f);
  // Another config's constants are honoured.
  EXPECT_NEAR(situ(1.5f, -2.0f, {2.0f, 10.0f}), formula(1.5, -2.0, 2, 10), 1e-6);
}

// Negative controls: SiTUv2's clamps (gate ≤ 7, up in [−7, 7]) and gate/up swapped are not K3's.
TEST(Situ, IsNeitherTheClampedVariantNorSymmetric) {
  const SituParams params;
  const float clamped = situ(6.0f, 7.0f, params);
  EXPECT_GT(std::fabs(situ(6.0f, 20.0f, params) - clamped), 1.0f);
  EXPECT_GT(std::fabs(situ(3.0f, 1.0f, params) - situ(1.0f, 3.0f, params)), 0.1f);
  std::vector<float> g = {-3.0f, 0.5f, 8.0f}, u = {2.0f, -30.0f, 0.25f}, out(3);
  situ_rows(g.data(), u.data(), 3, params, out.data());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], situ(g[i], u[i], params));
}

// The gated-MLP instructions' activation (kernels/gated_activation.h): SiTU when asked, and any
// other activation as act(g) · u, the same bits as the functions it stands for.
TEST(Situ, TheGatedActivationRunsSituOrActTimesUp) {
  std::vector<float> g = {-3.0f, 0.5f, 8.0f, 31.0f}, u = {2.0f, -30.0f, 0.25f, 60.0f};
  std::vector<float> situ_out = g, silu_out = g, expected(4), expected_silu = g;
  gated_product(GatedActivation::siTU({4.0f, 25.0f}), situ_out.data(), u.data(), 4);
  situ_rows(g.data(), u.data(), 4, {4.0f, 25.0f}, expected.data());
  EXPECT_EQ(std::memcmp(situ_out.data(), expected.data(), 4 * sizeof(float)), 0);
  gated_product(GatedActivation(Activation::kSilu), silu_out.data(), u.data(), 4);
  gated_product(Activation::kSilu, expected_silu.data(), u.data(), 4);
  EXPECT_EQ(std::memcmp(silu_out.data(), expected_silu.data(), 4 * sizeof(float)), 0);
  EXPECT_NE(silu_out, situ_out);
}

}  // namespace
}  // namespace md::kernels
