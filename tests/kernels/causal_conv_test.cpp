#include "kernels/causal_conv.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace md::kernels {
namespace {

// Direct formula: y_t[c] = silu(Σ_j w[c][j] · X[c][t + j]) over the zero-initialised history.
TEST(CausalConv, SequenceMatchesDirectFormulaAndStepwiseState) {
  const int64_t channels = 10, kernel = 4, rows = 9;
  std::vector<float> w = test::random_floats(channels * kernel, 1, 0.5f);
  std::vector<float> x = test::random_floats(rows * channels, 2);

  std::vector<float> state(channels * (kernel - 1), 0.0f), y(rows * channels);
  causal_conv(state.data(), w.data(), channels, kernel, x.data(), rows, y.data());

  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t t = 0; t < rows; ++t) {
      double acc = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        int64_t source = t - (kernel - 1) + j;  // tap kernel-1 is the current row
        if (source >= 0) acc += static_cast<double>(w[c * kernel + j]) * x[source * channels + c];
      }
      double expected = acc / (1.0 + std::exp(-acc));
      EXPECT_NEAR(y[t * channels + c], expected, 1e-5) << "c " << c << " t " << t;
    }
  }

  // Token by token with the rolling state gives the same outputs and final state.
  std::vector<float> step_state(channels * (kernel - 1), 0.0f), step_y(channels);
  for (int64_t t = 0; t < rows; ++t) {
    causal_conv(step_state.data(), w.data(), channels, kernel, x.data() + t * channels, 1,
                step_y.data());
    for (int64_t c = 0; c < channels; ++c) EXPECT_EQ(step_y[c], y[t * channels + c]);
  }
  EXPECT_EQ(step_state, state);
  // The state holds the last kernel-1 raw inputs, oldest first.
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t j = 0; j < kernel - 1; ++j) {
      EXPECT_EQ(state[c * (kernel - 1) + j], x[(rows - (kernel - 1) + j) * channels + c]);
    }
  }
}

}  // namespace
}  // namespace md::kernels
