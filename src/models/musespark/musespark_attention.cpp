// Muse Spark's attention (docs/models/muse-spark-nvfp4.md §4.2): q, k, v and an output gate
// projected from the normed stream; weightless QK norms per head (q then scaled by
// qk_scale_factor); RoPE on the sliding layers only (rotate-half pairing on the checkpoint's rows;
// the full layers are NoPE); each row's key and value written before it attends, to every earlier
// position on full layers and to the last `sliding_window` positions (itself included) on sliding
// ones; softmax in f32; the per-head output normed (weightless) and gated by sigmoid(gate)
// element-wise; o_proj.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "base/cache_aligned.h"
#include "base/dtype.h"
#include "kernels/activations.h"
#include "kernels/attention_runs.h"
#include "kernels/norms.h"
#include "kernels/weight_matrix.h"
#include "models/musespark/musespark_model.h"
#include "models/musespark/musespark_state.h"
#include "models/musespark/musespark_testing.h"

namespace md {

namespace {

using Buffer = CacheAligned<float>;
Buffer buffer(int64_t n) {
  return Buffer(static_cast<std::size_t>(n));
}

// One KV head's keys and values of positions [first, last] as f32 rows in position order, read
// once from the layer's storage (a ring on sliding layers; a bf16 cache widened) for every query
// head of its group.
struct HeadKeys {
  std::vector<float> keys, values;
  int64_t count = 0;
  kernels::KeyRun whole;

  // The gathered positions as the one run of keys the shared softmax reads.
  std::span<const kernels::KeyRun> run(int64_t head_dim) {
    whole = {keys.data(), values.data(), count, head_dim};
    return {&whole, 1};
  }

  void gather(const kernels::KvRows& kv, int64_t offset, int64_t head_dim, int64_t first,
              int64_t last) {
    count = last - first + 1;
    keys.resize(static_cast<std::size_t>(count * head_dim));
    values.resize(keys.size());
    kv.gather(offset, head_dim, first, last, keys.data(), values.data());
  }
};

}  // namespace

void MuseSparkModel::attention(int64_t layer, std::span<const Row> step, const float* x,
                               float* out) {
  const auto rows = static_cast<int64_t>(step.size());
  const MuseSparkConfig& c = config_;
  const MuseLayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
  const int64_t hd = c.head_dim, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  const auto eps = static_cast<float>(c.rms_norm_eps);
  Buffer q = buffer(rows * q_dim), k = buffer(rows * kv_dim), v = buffer(rows * kv_dim);
  Buffer gate = buffer(rows * q_dim), o = buffer(rows * q_dim);
  kernels::matmul(w.q_proj, x, rows, q.data(), pool_.get());
  kernels::matmul(w.k_proj, x, rows, k.data(), pool_.get());
  kernels::matmul(w.v_proj, x, rows, v.data(), pool_.get());
  kernels::matmul(w.gate_proj, x, rows, gate.data(), pool_.get());

  const bool rope =
      c.uses_rope(layer) || options_.ablation == testing::MuseAblation::kRopeOnNopeLayers;
  const bool windowed = !c.is_full_attention(layer);
  const int64_t window =
      c.sliding_window + (options_.ablation == testing::MuseAblation::kWindowOneLonger ? 1 : 0);
  const auto qk_scale = static_cast<float>(c.qk_scale_factor);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> cos_values(static_cast<std::size_t>(hd / 2));
  std::vector<float> sin_values(static_cast<std::size_t>(hd / 2));
  std::vector<float> scores;
  HeadKeys head_keys;
  // Rows in order: each writes its key and value, then attends (a ring slot a later row of the
  // same sequence overwrites has left every earlier row's window by then).
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t position = step[static_cast<std::size_t>(t)].position;
    kernels::KvRows& kv = step[static_cast<std::size_t>(t)].state->layer(layer);
    if (rope) rope_.angles(position, cos_values.data(), sin_values.data());
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      float* qh = q.data() + t * q_dim + h * hd;
      kernels::rms_norm_unweighted(qh, hd, eps, qh);
      for (int64_t d = 0; d < hd; ++d) qh[d] *= qk_scale;
      if (rope) rope_.apply(qh, cos_values.data(), sin_values.data());
    }
    for (int64_t g = 0; g < c.num_key_value_heads; ++g) {
      float* kh = k.data() + t * kv_dim + g * hd;
      kernels::rms_norm_unweighted(kh, hd, eps, kh);
      if (rope) rope_.apply(kh, cos_values.data(), sin_values.data());
    }
    kv.write(position, k.data() + t * kv_dim, v.data() + t * kv_dim);
    const int64_t first = windowed ? std::max<int64_t>(0, position - window + 1) : 0;
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      if (h % c.gqa_group() == 0)
        head_keys.gather(kv, (h / c.gqa_group()) * hd, hd, first, position);
      float* oh = o.data() + t * q_dim + h * hd;
      scores.resize(static_cast<std::size_t>(head_keys.count));
      kernels::attend_runs(q.data() + t * q_dim + h * hd, head_keys.run(hd), hd, scale,
                           scores.data(), oh);
      kernels::rms_norm_unweighted(oh, hd, eps, oh);
      const float* gh = gate.data() + t * q_dim + h * hd;
      for (int64_t d = 0; d < hd; ++d) oh[d] *= kernels::sigmoid(gh[d]);
    }
  }
  kernels::matmul(w.o_proj, o.data(), rows, out, pool_.get());
}

}  // namespace md
