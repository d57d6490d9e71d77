#include "models/musespark/musespark_routing.h"

#include "kernels/activations.h"
#include "kernels/dot_f32.h"

namespace md {

namespace {

constexpr float kRouteEpsilon = 1e-15f;

}  // namespace

MuseRoute muse_route(const MuseLayerWeights& w, const MuseSparkConfig& c, const float* x) {
  const int64_t experts = c.num_experts, h = c.hidden_size;
  const auto multiplier = static_cast<float>(c.output_multiplier);
  std::vector<float> score(static_cast<std::size_t>(experts));
  std::vector<float> selection(static_cast<std::size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) {
    const float z = kernels::dot_f32(x, w.router.data() + e * h, h);
    score[static_cast<std::size_t>(e)] = kernels::sigmoid(z * multiplier);
    selection[static_cast<std::size_t>(e)] =
        score[static_cast<std::size_t>(e)] + w.router_bias[static_cast<std::size_t>(e)];
  }
  MuseRoute r;
  std::vector<bool> taken(static_cast<std::size_t>(experts), false);
  float sum = 0;
  for (int64_t slot = 0; slot < c.num_experts_per_token; ++slot) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e) {
      if (taken[static_cast<std::size_t>(e)]) continue;
      if (best < 0 ||
          selection[static_cast<std::size_t>(e)] > selection[static_cast<std::size_t>(best)]) {
        best = e;
      }
    }
    taken[static_cast<std::size_t>(best)] = true;
    r.experts.push_back(best);
    sum += score[static_cast<std::size_t>(best)];
  }
  for (const int64_t e : r.experts) {
    r.weights.push_back(score[static_cast<std::size_t>(e)] / (sum + kRouteEpsilon));
  }
  return r;
}

}  // namespace md
