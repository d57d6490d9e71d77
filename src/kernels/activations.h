// Scalar activations evaluated in f32 (spec §0.2): σ, SiLU and PyTorch's softplus (threshold 20),
// and the hidden activations a config may name (transformers' ACT2FN names).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

namespace md::kernels {

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
inline float silu(float x) {
  return x * sigmoid(x);
}
inline float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// The activation of a gated MLP and of a Gated DeltaNet's short conv (`hidden_act`): every
// parameter-free entry of transformers' ACT2FN, with its formula.
enum class Activation : std::uint8_t {
  kSilu,          // "silu", "swish": x·σ(x)
  kGeluErf,       // "gelu", "gelu_python": ½x(1 + erf(x/√2))
  kGeluErf10,     // "gelu_10": the erf GELU clipped to [-10, 10]
  kGeluTanh,      // "gelu_pytorch_tanh", "gelu_new", "gelu_python_tanh", "gelu_accurate":
                  // ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
  kGeluFast,      // "gelu_fast": ½x(1 + tanh(0.7978845608·x(1 + 0.044715x²)))
  kQuickGelu,     // "quick_gelu": x·σ(1.702x)
  kHardSwish,     // "hardswish": x·min(max(x + 3, 0), 6)/6
  kLaplace,       // "laplace": ½(1 + erf((x − 0.707107)/(0.282095·√2)))
  kLeakyRelu,     // "leaky_relu": x, or 0.01x below 0
  kLinear,        // "linear": x
  kMish,          // "mish": x·tanh(softplus(x))
  kRelu,          // "relu": max(x, 0)
  kRelu2,         // "relu2": max(x, 0)²
  kRelu6,         // "relu6": min(max(x, 0), 6)
  kSigmoid,       // "sigmoid": σ(x)
  kSqrtSoftplus,  // "sqrtsoftplus": √softplus(x)
  kTanh,          // "tanh"
};

inline float gelu_erf(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}

inline float activate(Activation act, float x) {
  switch (act) {
    case Activation::kSilu:
      return silu(x);
    case Activation::kGeluErf:
      return gelu_erf(x);
    case Activation::kGeluErf10:
      return std::fmin(std::fmax(gelu_erf(x), -10.0f), 10.0f);
    case Activation::kGeluTanh:
      return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Activation::kGeluFast:
      return 0.5f * x * (1.0f + std::tanh(x * 0.7978845608f * (1.0f + 0.044715f * x * x)));
    case Activation::kQuickGelu:
      return x * sigmoid(1.702f * x);
    case Activation::kHardSwish:
      return x * std::fmin(std::fmax(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case Activation::kLaplace:
      return 0.5f * (1.0f + std::erf((x - 0.707107f) / (0.282095f * 1.41421356237309505f)));
    case Activation::kLeakyRelu:
      return x >= 0.0f ? x : 0.01f * x;
    case Activation::kLinear:
      return x;
    case Activation::kMish:
      return x * std::tanh(softplus(x));
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
    case Activation::kRelu2:
      return x > 0.0f ? x * x : 0.0f;
    case Activation::kRelu6:
      return std::fmin(std::fmax(x, 0.0f), 6.0f);
    case Activation::kSigmoid:
      return sigmoid(x);
    case Activation::kSqrtSoftplus:
      return std::sqrt(softplus(x));
    case Activation::kTanh:
      return std::tanh(x);
  }
  return x;
}

// x[i] = act(x[i]) for i in [0, n), and a gated MLP's g[i] = act(g[i]) · u[i]: the same bits as
// activate() per element, with the choice of activation made once per call, not per element
// (these run over every intermediate of every row of a decode step).
void activate_all(Activation act, float* x, int64_t n);
void gated_product(Activation act, float* g, const float* u, int64_t n);

// The activation transformers' ACT2FN maps `name` to, when it is one of these.
std::optional<Activation> activation_named(std::string_view name);
std::string_view activation_name(Activation act);

}  // namespace md::kernels
