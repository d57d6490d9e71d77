// Muse Spark's latent MoE (docs/models/muse-spark-nvfp4.md §4.4): every row is routed
// (musespark_routing.h); the stream is projected to the latent width and normed; each expert any
// row chose runs once over all the rows that chose it (ascending expert ids: its weights are read
// once per step), gate/up, SiLU·up and down at the latent width, bf16 or NVFP4 (in-register
// dequantisation, nvfp4_matmul.h); each row's expert outputs are scaled by the post-expert norm
// weight, normalised and summed weighted in selection order (kernels/expert_mix.h), and the sum
// is projected back to the stream.
#include <algorithm>
#include <vector>

#include "base/cache_aligned.h"
#include "kernels/activations.h"
#include "kernels/expert_mix.h"
#include "kernels/matmul.h"
#include "kernels/weight_matrix.h"
#include "models/musespark/musespark_experts.h"
#include "models/musespark/musespark_model.h"
#include "models/musespark/musespark_routing.h"
#include "models/musespark/musespark_row_math.h"
#include "models/musespark/musespark_testing.h"

namespace md {

namespace {

using Buffer = CacheAligned<float>;

// The (row, slot) pairs that chose each expert.
struct Choice {
  int64_t row = 0;
  std::size_t slot = 0;
};

}  // namespace

void MuseSparkModel::moe(int64_t layer, const float* x, int64_t rows, float* out) {
  const MuseLayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
  const kernels::ExpertMatrices& experts = experts_[static_cast<std::size_t>(layer)];
  const MuseSparkConfig& c = config_;
  const int64_t hm = c.moe_hidden_size, inter = c.moe_intermediate_size;
  const int64_t k = c.num_experts_per_token;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const auto post_eps = static_cast<float>(c.post_norm_eps);
  Buffer latent(static_cast<std::size_t>(rows * hm));
  kernels::matmul(w.pre_expert_proj, x, rows, latent.data(), pool_.get());
  muse::rms_rows(latent.data(), w.pre_expert_norm, rows, hm, eps, latent.data());

  std::vector<MuseRoute> routes;
  std::vector<std::vector<Choice>> chosen(static_cast<std::size_t>(c.num_experts));
  for (int64_t t = 0; t < rows; ++t) {
    routes.push_back(muse_route(w, c, x + t * c.hidden_size));
    for (std::size_t slot = 0; slot < routes.back().experts.size(); ++slot) {
      chosen[static_cast<std::size_t>(routes.back().experts[slot])].push_back({t, slot});
    }
    if (options_.probe != nullptr) {
      for (const int64_t e : routes.back().experts) {
        options_.probe->routes.push_back(static_cast<int32_t>(e));
      }
    }
  }

  // Each chosen expert's normalised output for every (row, slot) that chose it.
  Buffer outputs(static_cast<std::size_t>(rows * k * hm));
  // Scratch for the most rows an expert can take (every row chooses it at most once).
  Buffer in(static_cast<std::size_t>(rows * hm)), gate(static_cast<std::size_t>(rows * inter));
  Buffer up(static_cast<std::size_t>(rows * inter)), y(static_cast<std::size_t>(rows * hm));
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::vector<Choice>& pairs = chosen[static_cast<std::size_t>(e)];
    if (pairs.empty()) continue;
    const auto n = static_cast<int64_t>(pairs.size());
    for (int64_t i = 0; i < n; ++i) {
      const float* row = latent.data() + pairs[static_cast<std::size_t>(i)].row * hm;
      std::copy(row, row + hm, in.data() + i * hm);
    }
    const auto at = static_cast<std::size_t>(e);
    step_expert_bytes_ += expert_bytes(w.experts);
    kernels::matmul(experts.gate[at], in.data(), n, gate.data(), pool_.get());
    kernels::matmul(experts.up[at], in.data(), n, up.data(), pool_.get());
    kernels::gated_product(kernels::Activation::kSilu, gate.data(), up.data(), n * inter);
    kernels::matmul(experts.down[at], gate.data(), n, y.data(), pool_.get());
    for (int64_t i = 0; i < n; ++i) {
      const Choice& choice = pairs[static_cast<std::size_t>(i)];
      float* o = outputs.data() + (choice.row * k + static_cast<int64_t>(choice.slot)) * hm;
      std::copy(y.data() + i * hm, y.data() + (i + 1) * hm, o);
    }
  }

  Buffer mixed(static_cast<std::size_t>(rows * hm));
  for (int64_t t = 0; t < rows; ++t) {
    float* m = mixed.data() + t * hm;
    std::fill(m, m + hm, 0.0f);
    const MuseRoute& r = routes[static_cast<std::size_t>(t)];
    for (std::size_t slot = 0; slot < r.experts.size(); ++slot) {
      float* o = outputs.data() + (t * k + static_cast<int64_t>(slot)) * hm;
      kernels::mix_expert_output(o, w.post_expert_norm.data(), post_eps, r.weights[slot], hm, m);
    }
  }
  kernels::matmul(w.post_expert_proj, mixed.data(), rows, out, pool_.get());
}

}  // namespace md
