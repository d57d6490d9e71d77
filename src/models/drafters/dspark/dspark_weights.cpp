#include "models/drafters/dspark/dspark_weights.h"

#include <fmt/format.h>

#include <string>

#include "models/common/recording_binder.h"

namespace md {

namespace {

constexpr char kFamily[] = "dspark";

DSparkLayerWeights bind_layer(const DSparkConfig& c, RecordingBinder& bind, const std::string& p) {
  const int64_t h = c.hidden_size;
  DSparkLayerWeights w;
  w.input_layernorm = bind.bf16(p + "input_layernorm.weight", {h});
  w.post_attention_layernorm = bind.bf16(p + "post_attention_layernorm.weight", {h});
  w.q_proj = bind.matrix(p + "self_attn.q_proj.weight", c.q_dim(), h);
  w.k_proj = bind.matrix(p + "self_attn.k_proj.weight", c.kv_dim(), h);
  w.v_proj = bind.matrix(p + "self_attn.v_proj.weight", c.kv_dim(), h);
  w.o_proj = bind.matrix(p + "self_attn.o_proj.weight", h, c.q_dim());
  w.q_norm = bind.bf16(p + "self_attn.q_norm.weight", {c.head_dim});
  w.k_norm = bind.bf16(p + "self_attn.k_norm.weight", {c.head_dim});
  w.gate_proj = bind.matrix(p + "mlp.gate_proj.weight", c.intermediate_size, h);
  w.up_proj = bind.matrix(p + "mlp.up_proj.weight", c.intermediate_size, h);
  w.down_proj = bind.matrix(p + "mlp.down_proj.weight", h, c.intermediate_size);
  return w;
}

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
    w.layers.push_back(bind_layer(c, bind, fmt::format("layers.{}.", l)));
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
  for (const DSparkLayerWeights& layer : weights.layers) {
    spec.layers.push_back({&layer.k_proj, &layer.v_proj, layer.k_norm});
  }
  return spec;
}

}  // namespace md
