#include "models/musespark/musespark_routing.h"

#include <array>

#include "kernels/moe_routing.h"

namespace md {

kernels::WeightMatrix muse_router_matrix(const MuseLayerWeights& w, const MuseSparkConfig& c) {
  const int64_t h = c.hidden_size;
  return kernels::WeightMatrix::of(
      kernels::GgufMatrix{GgmlType::kF32, reinterpret_cast<const std::uint8_t*>(w.router.data()),
                          c.num_experts, h, static_cast<std::size_t>(h) * sizeof(float)});
}

MuseRoute muse_route(const MuseLayerWeights& w, const MuseSparkConfig& c, const float* x) {
  const int64_t experts = c.num_experts;
  std::vector<float> logits(static_cast<std::size_t>(experts));
  std::vector<float> scratch(static_cast<std::size_t>(3 * experts));
  kernels::matmul(muse_router_matrix(w, c), x, 1, logits.data(), nullptr);
  std::array<kernels::ExpertChoice, kernels::kMaxExpertsPerToken> choices{};
  kernels::route_sigmoid_bias_top_k(logits.data(), w.router_bias.data(), experts,
                                    c.num_experts_per_token,
                                    static_cast<float>(c.output_multiplier), kMuseRouterSumEpsilon,
                                    scratch.data(), choices.data());
  MuseRoute r;
  for (int64_t slot = 0; slot < c.num_experts_per_token; ++slot) {
    r.experts.push_back(choices[static_cast<std::size_t>(slot)].expert);
    r.weights.push_back(choices[static_cast<std::size_t>(slot)].weight);
  }
  return r;
}

}  // namespace md
