#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

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

TEST(Rope, PositionZeroIsTheIdentity) {
  for (const RopePairing pairing : {RopePairing::kHalf, RopePairing::kAdjacent}) {
    const Rope rope(64, 500000.0, pairing);
    std::vector<float> cos(32), sin(32), x(64);
    rope.angles(0, cos.data(), sin.data());
    for (int64_t i = 0; i < 64; ++i)
      x[static_cast<std::size_t>(i)] = 0.37f * static_cast<float>(i) - 5.0f;
    std::vector<float> y = x;
    rope.apply(y.data(), cos.data(), sin.data());
    EXPECT_EQ(y, x);
  }
}

// Rotate-half on a row equals the interleaved pairing on the row permuted so that pair j is
// (j, j + d/2): the checkpoint's q/k rows need no reordering for kHalf. Bit for bit.
TEST(Rope, RotateHalfIsTheInterleavedPairingOfPermutedRows) {
  const Rope half(64, 500000.0, RopePairing::kHalf);
  const Rope adjacent(64, 500000.0, RopePairing::kAdjacent);
  std::vector<float> cos(32), sin(32), x(64), permuted(64);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& e : x) e = normal(rng);
  for (const int64_t position : {1, 7, 300, 70000}) {
    half.angles(position, cos.data(), sin.data());
    for (std::size_t j = 0; j < 32; ++j) permuted[2 * j] = x[j], permuted[2 * j + 1] = x[j + 32];
    std::vector<float> a = x;
    half.apply(a.data(), cos.data(), sin.data());
    adjacent.apply(permuted.data(), cos.data(), sin.data());
    for (std::size_t j = 0; j < 32; ++j) {
      EXPECT_EQ(a[j], permuted[2 * j]) << position;
      EXPECT_EQ(a[j + 32], permuted[2 * j + 1]) << position;
    }
    EXPECT_NE(a, x) << position;
  }
}

}  // namespace
}  // namespace md::kernels
