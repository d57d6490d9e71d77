#include "kernels/activations.h"

#include <array>
#include <utility>

namespace md::kernels {

namespace {

// Every parameter-free name of transformers' ACT2FN (prelu and xielu learn parameters: refused);
// the first name of an activation is the one listings use.
constexpr std::array<std::pair<std::string_view, Activation>, 22> kNames = {{
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
    {"tanh", Activation::kTanh},
}};

}  // namespace

std::optional<Activation> activation_named(std::string_view name) {
  for (const auto& [known, act] : kNames) {
    if (known == name) return act;
  }
  return std::nullopt;
}

namespace {

template <Activation A>
void activate_all_as(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = activate(A, x[i]);
}

template <Activation A>
void gated_product_as(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = activate(A, g[i]) * u[i];
}

constexpr int kActivations = static_cast<int>(Activation::kTanh) + 1;

// One instantiation per activation, indexed by its enum value.
template <int... I>
constexpr auto make_tables(std::integer_sequence<int, I...>) {
  return std::pair{std::array{&activate_all_as<static_cast<Activation>(I)>...},
                   std::array{&gated_product_as<static_cast<Activation>(I)>...}};
}
constexpr auto kTables = make_tables(std::make_integer_sequence<int, kActivations>());

}  // namespace

void activate_all(Activation act, float* x, int64_t n) {
  kTables.first[static_cast<std::size_t>(act)](x, n);
}

void gated_product(Activation act, float* g, const float* u, int64_t n) {
  kTables.second[static_cast<std::size_t>(act)](g, u, n);
}

std::string_view activation_name(Activation act) {
  for (const auto& [known, named] : kNames) {
    if (named == act) return known;
  }
  return "?";
}

}  // namespace md::kernels
