#include "models/drafters/dspark/dspark_synthetic.h"

#include <algorithm>

#include "models/common/synthetic_weights.h"

namespace md {

namespace {

constexpr int64_t kLayers = 5;

}  // namespace

DSparkConfig synthetic_dspark_config(const TargetView& target) {
  DSparkConfig c;
  c.config_path = "synthetic DSpark";
  c.hidden_size = target.hidden_size;
  c.vocab_size = target.vocab_size;
  c.num_layers = kLayers;
  c.head_dim = std::min<int64_t>(64, target.hidden_size / 4);
  // 96 query heads of 64 over 7168 channels in the published drafter (q_dim ≈ 6/7 × hidden),
  // 6 per KV head.
  c.num_attention_heads = std::max<int64_t>(6, target.hidden_size * 6 / 7 / c.head_dim / 6 * 6);
  c.num_key_value_heads = c.num_attention_heads / 6;
  c.intermediate_size = 2 * target.hidden_size;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 1e4;
  c.sliding_window = 2048;
  c.block_size = 8;
  c.markov_rank = std::min<int64_t>(256, target.hidden_size);
  c.mask_token_id = std::max<int64_t>(0, target.vocab_size - 3);
  c.draft_vocab_size = target.vocab_size;
  // [24, 48, 72, 88, 92] of 93 layers, scaled to the target's depth, within 2 … L − 1 (a
  // checkpoint's rule, §13.1). A stand-in target of 2 layers (muse-spark-layer) has no id in that
  // range: there the benchmark drafter taps id 1, the residual after layer 0 (the same work).
  const int64_t last = std::max<int64_t>(1, target.num_layers - 1);
  for (int64_t id : {24, 48, 72, 88, 92}) {
    const int64_t scaled =
        std::clamp<int64_t>(id * target.num_layers / 93, std::min<int64_t>(2, last), last);
    if (std::find(c.aux_hidden_state_layer_ids.begin(), c.aux_hidden_state_layer_ids.end(),
                  scaled) == c.aux_hidden_state_layer_ids.end()) {
      c.aux_hidden_state_layer_ids.push_back(scaled);
    }
  }
  return c;
}

std::unique_ptr<DSparkDrafter> make_synthetic_dspark(const TargetView& target, int threads,
                                                     const DSparkOptions& options) {
  DSparkConfig c = synthetic_dspark_config(target);
  DSparkWeights w;
  ThreadPool pool(threads);
  SyntheticWeights random(w.owned, pool, /*seed=*/2000);
  const int64_t h = c.hidden_size;
  w.lm_head = kernels::WeightMatrix::of(random.matrix(c.vocab_size, h));
  w.embed_tokens = w.lm_head;
  w.fc = random.matrix(h, c.fc_in_features());
  w.hidden_norm = random.tensor(h, 1.0f);
  w.norm = random.tensor(h, 1.0f);
  w.markov_w1 = {random.tensor(c.vocab_size * c.markov_rank, 0.5f), c.vocab_size, c.markov_rank};
  w.markov_w2 = random.matrix(c.vocab_size, c.markov_rank);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    make_synthetic_draft_layer(random, draft_layer_shape(c), w.layers.emplace_back());
  }
  return std::make_unique<DSparkDrafter>(std::move(c), std::move(w), target, threads, options);
}

}  // namespace md
