#include "models/drafters/dflash2/dflash2_synthetic.h"

#include <algorithm>

#include "models/common/synthetic_weights.h"

namespace md {

namespace {

constexpr int64_t kLayers = 5;
constexpr int64_t kTaps = 5;

DFlash2ConvWeights conv_weights(const DFlash2Config& c, SyntheticWeights& random) {
  DFlash2ConvWeights w;
  w.base_kernel = random.tensor(2 * c.conv_kernel_size * c.hidden_size, 0.3f);
  w.kernel_projection = random.matrix(c.kernel_projection_rows(), c.hidden_size);
  return w;
}

DFlash2LayerWeights layer_weights(const DFlash2Config& c, SyntheticWeights& random) {
  DFlash2LayerWeights w;
  make_synthetic_draft_layer(random, draft_layer_shape(c), w);
  w.attention_conv = conv_weights(c, random);
  w.mlp_conv = conv_weights(c, random);
  return w;
}

}  // namespace

DFlash2Config synthetic_dflash2_config(const TargetView& target) {
  DFlash2Config c;
  c.config_path = "synthetic DFlash2";
  c.hidden_size = target.hidden_size;
  c.vocab_size = target.vocab_size;
  c.num_target_layers = target.num_layers;
  c.num_layers = kLayers;
  c.head_dim = std::min<int64_t>(128, target.hidden_size / 4);
  // 32 query heads over 5120 channels in the published drafter: q_dim = 0.8 × hidden, 4 query
  // heads per KV head.
  c.num_attention_heads =
      std::max<int64_t>(4, (target.hidden_size * 4 / 5 / c.head_dim + 2) / 4 * 4);
  c.num_key_value_heads = c.num_attention_heads / 4;
  c.intermediate_size = std::max<int64_t>(64, target.hidden_size * 17 / 5 / 64 * 64);
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e7;
  c.sliding_window = 2048;
  c.block_size = 8;
  // [5, 19, 33, 47, 61] of 64 layers, scaled to the target's depth.
  for (int64_t i = 0; i < kTaps; ++i) {
    c.target_layer_ids.push_back((5 + 14 * i) * target.num_layers / 64);
  }
  c.mask_token_id = std::max<int64_t>(0, target.vocab_size - 250);
  c.conv_kernel_size = 2;
  c.conv_group_size = 16;
  c.selector_rank = std::min<int64_t>(256, target.hidden_size);
  c.selector_top_k = 16;
  return c;
}

std::unique_ptr<DFlash2Drafter> make_synthetic_dflash2(const TargetView& target, int threads,
                                                       const DFlash2Options& options) {
  DFlash2Config c = synthetic_dflash2_config(target);
  DFlash2Weights w;
  ThreadPool pool(threads);
  SyntheticWeights random(w.owned, pool, /*seed=*/1000);
  const int64_t h = c.hidden_size;
  w.fc = random.matrix(h, c.fc_in_features());
  w.hidden_norm = random.tensor(h, 1.0f);
  w.norm = random.tensor(h, 1.0f);
  w.selector.hidden_projection = random.matrix(c.selector_rank, h);
  w.selector.predecessor_codebook = {random.tensor(c.vocab_size * c.selector_rank, 0.5f),
                                     c.vocab_size, c.selector_rank};
  w.selector.successor_codebook = {random.tensor(c.vocab_size * c.selector_rank, 0.5f),
                                   c.vocab_size, c.selector_rank};
  for (int64_t l = 0; l < c.num_layers; ++l) w.layers.push_back(layer_weights(c, random));
  return std::make_unique<DFlash2Drafter>(std::move(c), std::move(w), target, threads, options);
}

}  // namespace md
