#include "kernels/arithmetic_peak.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/isa.h"

namespace md::kernels {
namespace {

// Each path counts the operations it issues: chains × lanes × 2 (an fma, or the scalar path's
// multiply and add) per iteration, and its sink is the finite sum of its chains.
TEST(ArithmeticPeak, ChainsCountTheOperationsTheyIssue) {
  float sink = NAN;
  EXPECT_EQ(fma_chains_scalar(1000, sink), 1000 * 16 * 2);
  EXPECT_TRUE(std::isfinite(sink));
  for (Isa isa : available_isas()) {
#if defined(__x86_64__)
    sink = NAN;
    if (isa == Isa::kAvx2) {
      EXPECT_EQ(fma_chains_avx2(1000, sink), 1000 * 12 * 8 * 2);
    }
    if (isa == Isa::kAvx512) {
      EXPECT_EQ(fma_chains_avx512(1000, sink), 1000 * 16 * 16 * 2);
    }
    if (isa != Isa::kScalar) {
      EXPECT_TRUE(std::isfinite(sink)) << isa_name(isa);
    }
#endif
  }
}

// The vector paths' peak is far above the scalar one's (16 or 8 lanes of fma against one multiply
// and one add): a relative check that the measurement measures the chosen path.
TEST(ArithmeticPeak, TheWidestPathPeaksFarAboveTheScalarOne) {
  const double scalar = measure_fma_peak(Isa::kScalar, 1, 0.0);
  EXPECT_GT(scalar, 0.0);
  const Isa widest = available_isas().back();
  if (widest == Isa::kScalar) GTEST_SKIP() << "no vector path on this CPU";
  EXPECT_GT(measure_fma_peak(widest, 1, 0.0), 2 * scalar) << isa_name(widest);
}

}  // namespace
}  // namespace md::kernels
