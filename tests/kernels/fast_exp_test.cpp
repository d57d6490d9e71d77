#include "kernels/fast_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace md::kernels {
namespace {

TEST(FastExp, RelativeErrorBelowThreeTenMillionthsOnTheWholeRange) {
  double worst = 0.0;
  for (float x = 0.0f; x >= -87.0f; x -= 0.000731f) {
    const double exact = std::exp(double{x});
    worst = std::max(worst, std::fabs(exp_nonpositive(x) - exact) / exact);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
}

TEST(FastExp, UnderflowNaNAndMinusInfinityGiveZero) {
  EXPECT_EQ(exp_nonpositive(-87.5f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1e30f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_nonpositive(std::numeric_limits<float>::quiet_NaN()), 0.0f);
}

}  // namespace
}  // namespace md::kernels
