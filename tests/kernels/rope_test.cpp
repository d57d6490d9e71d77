#include "kernels/rope.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace md::kernels {
namespace {

TEST(Rope, RotatesHalfPairsInsideTheRotarySliceOnly) {
  const int64_t head_dim = 64, rotary = 16;
  Rope rope(rotary, 1e4);
  std::vector<float> x = test::random_floats(head_dim, 9);
  std::vector<float> original = x;
  std::vector<float> c(rotary / 2), s(rotary / 2);
  const int64_t position = 37;
  rope.angles(position, c.data(), s.data());
  rope.apply(x.data(), c.data(), s.data());
  for (int64_t j = 0; j < rotary / 2; ++j) {
    double angle = position * std::pow(1e4, -2.0 * j / rotary);
    double a = original[j], b = original[j + rotary / 2];
    EXPECT_NEAR(x[j], a * std::cos(angle) - b * std::sin(angle), 2e-5) << j;
    EXPECT_NEAR(x[j + rotary / 2], b * std::cos(angle) + a * std::sin(angle), 2e-5) << j;
  }
  for (int64_t d = rotary; d < head_dim; ++d) EXPECT_EQ(x[d], original[d]) << d;
}

TEST(Rope, RelativePositionsGiveEqualDotProducts) {
  Rope rope(64, 1e7);
  std::vector<float> q = test::random_floats(64, 1), k = test::random_floats(64, 2);
  auto rotated_dot = [&](int64_t pq, int64_t pk) {
    std::vector<float> a = q, b = k, c(32), s(32);
    rope.angles(pq, c.data(), s.data());
    rope.apply(a.data(), c.data(), s.data());
    rope.angles(pk, c.data(), s.data());
    rope.apply(b.data(), c.data(), s.data());
    double sum = 0;
    for (int i = 0; i < 64; ++i) sum += static_cast<double>(a[i]) * b[i];
    return sum;
  };
  EXPECT_NEAR(rotated_dot(10, 3), rotated_dot(107, 100), 1e-3);
}

}  // namespace
}  // namespace md::kernels
