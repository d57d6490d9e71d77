#include "models/drafters/dspark/dspark_weights.h"

#include <fmt/format.h>

#include <string>

#include "models/common/recording_binder.h"

namespace md {

namespace {

constexpr char kFamily[] = "dspark";

}  // namespace

DSparkWeights bind_dspark_weights(const DSparkConfig& c, const Checkpoint& checkpoint) {
  DSparkWeights w;
  RecordingBinder bind(checkpoint, kFamily, w.owned);
  const int64_t h = c.hidden_size, v = c.vocab_size;
  w.embed_tokens = bind.matrix("embed_tokens.weight", v, h);
  w.lm_head = bind.matrix("lm_head.weight", v, h);
  w.fc = bind.matrix("fc.weight", h, c.fc_in_features());
  w.hidden_norm = bind.bf16("hidden_norm.weight", {h});
  w.norm = bind.bf16("norm.weight", {h});
  w.markov_w1 = bind.matrix("markov_head.markov_w1.weight", v, c.markov_rank);
  w.markov_w2 = bind.matrix("markov_head.markov_w2.weight", v, c.markov_rank);
  if (c.enable_confidence_head) {
    const int64_t in = c.confidence_head_with_markov ? h + c.markov_rank : h;
    w.confidence = bind.matrix("confidence_head.proj.weight", 1, in);
    w.confidence_bias = bind.f32_vector("confidence_head.proj.bias", 1);
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    bind_draft_layer(bind, fmt::format("layers.{}.", l), draft_layer_shape(c),
                     w.layers.emplace_back());
  }
  bind.refuse_unbound();
  return w;
}

DraftContextSpec dspark_context_spec(const DSparkConfig& config, const DSparkWeights& weights) {
  DraftContextSpec spec{.family = "DSpark",
                        .hidden_size = config.hidden_size,
                        .num_taps = config.num_taps(),
                        .kv_heads = config.num_key_value_heads,
                        .head_dim = config.head_dim,
                        .window = config.sliding_window,
                        .eps = static_cast<float>(config.rms_norm_eps),
                        .fc = &weights.fc,
                        .hidden_norm = weights.hidden_norm,
                        .layers = {}};
  for (const DSparkLayerWeights& layer : weights.layers)
    spec.layers.push_back(context_layer(layer));
  return spec;
}

}  // namespace md
