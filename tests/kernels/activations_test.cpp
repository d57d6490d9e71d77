// The hidden activations a config may name (kernels/activations.h) against their definitions in
// long double, and the names transformers' ACT2FN gives them.
#include "kernels/activations.h"

#include <gtest/gtest.h>

#include <cmath>

namespace md::kernels {
namespace {

long double reference(Activation act, long double x) {
  switch (act) {
    case Activation::kSilu:
      return x / (1 + std::exp(-x));
    case Activation::kGeluErf:
      return 0.5L * x * (1 + std::erf(x / std::sqrt(2.0L)));
    case Activation::kGeluTanh:
      return 0.5L * x *
             (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846L) * (x + 0.044715L * x * x * x)));
    case Activation::kRelu:
      return x > 0 ? x : 0;
  }
  return 0;
}

TEST(Activations, MatchTheirDefinitions) {
  for (Activation act :
       {Activation::kSilu, Activation::kGeluErf, Activation::kGeluTanh, Activation::kRelu}) {
    for (float x = -12.0f; x <= 12.0f; x += 0.037f) {
      const long double want = reference(act, x);
      EXPECT_NEAR(activate(act, x), static_cast<float>(want), 4e-7 * (1 + std::fabs(want)))
          << activation_name(act) << " at " << x;
    }
  }
  // Negative control: the two GELUs are different functions (about 1e-4 apart at -2, hundreds of
  // times the tolerance above).
  EXPECT_GT(
      std::fabs(activate(Activation::kGeluErf, -2.0f) - activate(Activation::kGeluTanh, -2.0f)),
      5e-5);
}

TEST(Activations, TransformersNamesMapToThem) {
  EXPECT_EQ(activation_named("silu"), Activation::kSilu);
  EXPECT_EQ(activation_named("swish"), Activation::kSilu);
  EXPECT_EQ(activation_named("gelu"), Activation::kGeluErf);
  EXPECT_EQ(activation_named("gelu_pytorch_tanh"), Activation::kGeluTanh);
  EXPECT_EQ(activation_named("gelu_new"), Activation::kGeluTanh);
  EXPECT_EQ(activation_named("relu"), Activation::kRelu);
  EXPECT_FALSE(activation_named("gelu_fast").has_value());
  EXPECT_FALSE(activation_named("SiLU").has_value());
  EXPECT_EQ(activation_name(Activation::kGeluTanh), "gelu_pytorch_tanh");
}

}  // namespace
}  // namespace md::kernels
