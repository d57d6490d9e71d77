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

// The activation of a gated MLP and of a Gated DeltaNet's short conv (`hidden_act`).
enum class Activation : std::uint8_t {
  kSilu,      // "silu", "swish": x·σ(x)
  kGeluErf,   // "gelu": x·Φ(x) = ½x(1 + erf(x/√2))
  kGeluTanh,  // "gelu_pytorch_tanh", "gelu_new": ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
  kRelu,      // "relu": max(x, 0)
};

inline float activate(Activation act, float x) {
  switch (act) {
    case Activation::kSilu:
      return silu(x);
    case Activation::kGeluErf:
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::kGeluTanh:
      return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
  }
  return x;
}

// The activation transformers' ACT2FN maps `name` to, when it is one of these.
std::optional<Activation> activation_named(std::string_view name);
std::string_view activation_name(Activation act);

}  // namespace md::kernels
