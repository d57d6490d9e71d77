// Muse Spark's latent MoE (docs/models/muse-spark-nvfp4.md §4.4): the router scores every expert
// from the 8192-wide normed stream in f32, sigmoid(z · output_multiplier); the selection adds the
// correction bias and takes the k largest by iterated argmax (the lowest index on ties); the mix
// weights are the unbiased scores renormalised. The stream is projected to the latent width and
// normed; each chosen expert's gate/up, SiLU·up and down run at that width, the expert's output is
// scaled by its post-expert norm weight and then normalised; the weighted sum (slot order) is
// projected back. NVFP4 rows are dequantised as they are used.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/cache_aligned.h"
#include "base/dtype.h"
#include "kernels/activations.h"
#include "kernels/dot_f32.h"
#include "kernels/matmul.h"
#include "kernels/nvfp4.h"
#include "kernels/weight_matrix.h"
#include "models/musespark/musespark_model.h"
#include "models/musespark/musespark_routing.h"
#include "models/musespark/musespark_row_math.h"

namespace md {

namespace {

using Buffer = CacheAligned<float>;
// y[r] = row r of expert e's matrix · x for `rows` rows of width `cols`. `first_row` is the row's
// index within the expert's stacked matrix (gate_up: gate rows, then up rows).
class ExpertRows {
 public:
  ExpertRows(const MuseExperts& w, const MuseSparkConfig& c) : w_(w), c_(c) {}

  void gate_up(int64_t e, const float* x, float* y) {
    const int64_t rows = 2 * c_.moe_intermediate_size, cols = c_.moe_hidden_size;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = e * rows + r;
      if (!w_.nvfp4) {
        y[r] = kernels::dot_bf16(w_.gate_up + at * cols, x, cols);
        continue;
      }
      const float global = w_.gate_up_global[static_cast<std::size_t>(
          2 * e + (r < c_.moe_intermediate_size ? 0 : 1))];
      y[r] = nvfp4_dot(w_.gate_up_codes + at * (cols / 2),
                       w_.gate_up_scales + at * (cols / kernels::kNvfp4Block), cols, global, x);
    }
  }

  void down(int64_t e, const float* x, float* y) {
    const int64_t rows = c_.moe_hidden_size, cols = c_.moe_intermediate_size;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = e * rows + r;
      if (!w_.nvfp4) {
        y[r] = kernels::dot_bf16(w_.down + at * cols, x, cols);
        continue;
      }
      y[r] = nvfp4_dot(w_.down_codes + at * (cols / 2),
                       w_.down_scales + at * (cols / kernels::kNvfp4Block), cols,
                       w_.down_global[static_cast<std::size_t>(e)], x);
    }
  }

 private:
  float nvfp4_dot(const uint8_t* codes, const uint8_t* scales, int64_t cols, float global,
                  const float* x) {
    row_.resize(static_cast<std::size_t>(cols));
    kernels::dequantize_nvfp4_row(codes, scales, cols, global, row_.data());
    return kernels::dot_f32(row_.data(), x, cols);
  }

  const MuseExperts& w_;
  const MuseSparkConfig& c_;
  std::vector<float> row_;
};

}  // namespace

void MuseSparkModel::moe(const MuseLayerWeights& w, const float* x, int64_t rows, float* out) {
  const MuseSparkConfig& c = config_;
  const int64_t hm = c.moe_hidden_size, inter = c.moe_intermediate_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const auto post_eps = static_cast<float>(c.post_norm_eps);
  Buffer latent(static_cast<std::size_t>(rows * hm));
  Buffer mixed(static_cast<std::size_t>(rows * hm));
  kernels::matmul(w.pre_expert_proj, x, rows, latent.data(), pool_.get());
  muse::rms_rows(latent.data(), w.pre_expert_norm, rows, hm, eps, latent.data());
  ExpertRows experts(w.experts, c);
  std::vector<float> gate_up(static_cast<std::size_t>(2 * inter));
  std::vector<float> y(static_cast<std::size_t>(hm));
  for (int64_t t = 0; t < rows; ++t) {
    const MuseRoute r = muse_route(w, c, x + t * c.hidden_size);
    if (options_.routing_log != nullptr) {
      for (const int64_t e : r.experts) options_.routing_log->push_back(static_cast<int32_t>(e));
    }
    float* m = mixed.data() + t * hm;
    std::fill(m, m + hm, 0.0f);
    for (std::size_t slot = 0; slot < r.experts.size(); ++slot) {
      const int64_t e = r.experts[slot];
      experts.gate_up(e, latent.data() + t * hm, gate_up.data());
      for (int64_t i = 0; i < inter; ++i) {
        gate_up[static_cast<std::size_t>(i)] = kernels::silu(gate_up[static_cast<std::size_t>(i)]) *
                                               gate_up[static_cast<std::size_t>(inter + i)];
      }
      experts.down(e, gate_up.data(), y.data());
      for (int64_t i = 0; i < hm; ++i) {
        y[static_cast<std::size_t>(i)] *= w.post_expert_norm[static_cast<std::size_t>(i)];
      }
      muse::rms_unweighted(y.data(), hm, post_eps, y.data());
      for (int64_t i = 0; i < hm; ++i) m[i] += r.weights[slot] * y[static_cast<std::size_t>(i)];
    }
  }
  kernels::matmul(w.post_expert_proj, mixed.data(), rows, out, pool_.get());
}

}  // namespace md
