#include "kernels/norms.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace md::kernels {
namespace {

using test::widen;

std::vector<double> oracle_rms(const std::vector<float>& x, const std::vector<uint16_t>& w,
                               double eps, bool zero_centred) {
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v) * v;
  double inv = 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    y[i] = x[i] * inv * (zero_centred ? 1.0 + widen(w[i]) : widen(w[i]));
  }
  return y;
}

TEST(RmsNorm, ZeroCentredAndPlainMatchOracle) {
  std::vector<float> x = test::random_floats(256, 1, 3.0f);
  std::vector<uint16_t> w = test::random_bf16(256, 2, 0.5f);
  std::vector<float> y(256);
  rms_norm(x.data(), w.data(), 256, 1e-6f, NormWeight::kZeroCentred, y.data());
  EXPECT_LT(test::relative_max_error(y, oracle_rms(x, w, 1e-6, true)), 1e-6);
  rms_norm(x.data(), w.data(), 256, 1e-6f, NormWeight::kPlain, y.data());
  EXPECT_LT(test::relative_max_error(y, oracle_rms(x, w, 1e-6, false)), 1e-6);
  // The two weightings genuinely differ (a test that swapped them would fail).
  EXPECT_GT(test::relative_max_error(y, oracle_rms(x, w, 1e-6, true)), 0.1);
}

TEST(GatedRmsNorm, MatchesOracle) {
  std::vector<float> o = test::random_floats(128, 3), z = test::random_floats(128, 4);
  std::vector<uint16_t> w = test::random_bf16(128, 5, 0.3f);
  std::vector<float> y(128);
  std::vector<float> w_f32(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) w_f32[i] = static_cast<float>(test::widen(w[i]));
  gated_rms_norm(o.data(), z.data(), w_f32.data(), 128, 1e-6f, y.data());
  std::vector<double> expected = oracle_rms(o, w, 1e-6, false);
  for (std::size_t i = 0; i < 128; ++i)
    expected[i] *= z[i] / (1.0 + std::exp(-static_cast<double>(z[i])));
  EXPECT_LT(test::relative_max_error(y, expected), 1e-6);
}

TEST(L2Normalize, EpsilonIsAddedToTheSum) {
  std::vector<float> x = {3e-4f, 4e-4f};  // Σx² = 2.5e-7, comparable to eps = 1e-6
  l2_normalize(x.data(), 2, 1e-6f, 2.0f);
  double inv = 2.0 / std::sqrt(2.5e-7 + 1e-6);
  EXPECT_NEAR(x[0], 3e-4 * inv, 1e-6);
  EXPECT_NEAR(x[1], 4e-4 * inv, 1e-6);
}

}  // namespace
}  // namespace md::kernels
