// The hidden activations a config may name (kernels/activations.h) against transformers'
// definitions (transformers/activations.py) in long double, and the names ACT2FN gives them.
#include "kernels/activations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace md::kernels {
namespace {

using Ld = long double;

Ld sigmoid_ld(Ld x) {
  return 1 / (1 + std::exp(-x));
}
Ld softplus_ld(Ld x) {
  return x > 20 ? x : std::log1p(std::exp(x));
}
Ld gelu_ld(Ld x) {
  return 0.5L * x * (1 + std::erf(x / std::sqrt(2.0L)));
}

Ld reference(Activation act, Ld x) {
  const Ld pi = 3.14159265358979323846L;
  switch (act) {
    case Activation::kSilu:
      return x * sigmoid_ld(x);
    case Activation::kGeluErf:
      return gelu_ld(x);
    case Activation::kGeluErf10:
      return std::clamp(gelu_ld(x), -10.0L, 10.0L);
    case Activation::kGeluTanh:
      return 0.5L * x * (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715L * x * x * x)));
    case Activation::kGeluFast:
      return 0.5L * x * (1 + std::tanh(x * 0.7978845608L * (1 + 0.044715L * x * x)));
    case Activation::kQuickGelu:
      return x * sigmoid_ld(1.702L * x);
    case Activation::kHardSwish:
      return x * std::clamp(x + 3, 0.0L, 6.0L) / 6;
    case Activation::kLaplace:
      return 0.5L * (1 + std::erf((x - 0.707107L) / (0.282095L * std::sqrt(2.0L))));
    case Activation::kLeakyRelu:
      return x >= 0 ? x : 0.01L * x;
    case Activation::kLinear:
      return x;
    case Activation::kMish:
      return x * std::tanh(softplus_ld(x));
    case Activation::kRelu:
      return std::max(x, 0.0L);
    case Activation::kRelu2:
      return std::max(x, 0.0L) * std::max(x, 0.0L);
    case Activation::kRelu6:
      return std::clamp(x, 0.0L, 6.0L);
    case Activation::kSigmoid:
      return sigmoid_ld(x);
    case Activation::kSqrtSoftplus:
      return std::sqrt(softplus_ld(x));
    case Activation::kTanh:
      return std::tanh(x);
  }
  return 0;
}

const std::vector<Activation>& all_activations() {
  static const std::vector<Activation> all = {
      Activation::kSilu,         Activation::kGeluErf,  Activation::kGeluErf10,
      Activation::kGeluTanh,     Activation::kGeluFast, Activation::kQuickGelu,
      Activation::kHardSwish,    Activation::kLaplace,  Activation::kLeakyRelu,
      Activation::kLinear,       Activation::kMish,     Activation::kRelu,
      Activation::kRelu2,        Activation::kRelu6,    Activation::kSigmoid,
      Activation::kSqrtSoftplus, Activation::kTanh};
  return all;
}

TEST(Activations, MatchTheirDefinitions) {
  for (Activation act : all_activations()) {
    for (float x = -12.0f; x <= 12.0f; x += 0.037f) {
      const Ld want = reference(act, x);
      // A few f32 roundings of a smooth function; relu2 squares, so twice the relative error.
      EXPECT_NEAR(activate(act, x), static_cast<float>(want), 6e-7 * (1 + std::fabs(want)))
          << activation_name(act) << " at " << x;
    }
  }
  // Negative controls: the GELU variants are different functions (about 1e-4 apart at -2,
  // hundreds of times the tolerance above), and gelu_10 clips.
  EXPECT_GT(
      std::fabs(activate(Activation::kGeluErf, -2.0f) - activate(Activation::kGeluTanh, -2.0f)),
      5e-5);
  EXPECT_EQ(activate(Activation::kGeluErf10, 11.0f), 10.0f);
}

TEST(Activations, EveryParameterFreeAct2FnNameMapsToOne) {
  const std::vector<std::pair<const char*, Activation>> names = {
      {"silu", Activation::kSilu},
      {"swish", Activation::kSilu},
      {"gelu", Activation::kGeluErf},
      {"gelu_python", Activation::kGeluErf},
      {"gelu_10", Activation::kGeluErf10},
      {"gelu_pytorch_tanh", Activation::kGeluTanh},
      {"gelu_new", Activation::kGeluTanh},
      {"gelu_python_tanh", Activation::kGeluTanh},
      {"gelu_accurate", Activation::kGeluTanh},
      {"gelu_fast", Activation::kGeluFast},
      {"quick_gelu", Activation::kQuickGelu},
      {"hardswish", Activation::kHardSwish},
      {"laplace", Activation::kLaplace},
      {"leaky_relu", Activation::kLeakyRelu},
      {"linear", Activation::kLinear},
      {"mish", Activation::kMish},
      {"relu", Activation::kRelu},
      {"relu2", Activation::kRelu2},
      {"relu6", Activation::kRelu6},
      {"sigmoid", Activation::kSigmoid},
      {"sqrtsoftplus", Activation::kSqrtSoftplus},
      {"tanh", Activation::kTanh}};
  for (const auto& [name, act] : names) EXPECT_EQ(activation_named(name), act) << name;
  for (Activation act : all_activations()) {
    EXPECT_EQ(activation_named(activation_name(act)), act) << activation_name(act);
  }
  // Activations with learned parameters, and names ACT2FN does not have.
  for (const char* name : {"prelu", "xielu", "SiLU", "gelu_tanh", ""}) {
    EXPECT_FALSE(activation_named(name).has_value()) << name;
  }
}

}  // namespace
}  // namespace md::kernels
