#include "kernels/activations.h"

#include <array>
#include <utility>

namespace md::kernels {

namespace {

constexpr std::array<std::pair<std::string_view, Activation>, 6> kNames = {{
    {"silu", Activation::kSilu},
    {"swish", Activation::kSilu},
    {"gelu", Activation::kGeluErf},
    {"gelu_pytorch_tanh", Activation::kGeluTanh},
    {"gelu_new", Activation::kGeluTanh},
    {"relu", Activation::kRelu},
}};

}  // namespace

std::optional<Activation> activation_named(std::string_view name) {
  for (const auto& [known, act] : kNames) {
    if (known == name) return act;
  }
  return std::nullopt;
}

std::string_view activation_name(Activation act) {
  for (const auto& [known, named] : kNames) {
    if (named == act) return known;
  }
  return "?";
}

}  // namespace md::kernels
