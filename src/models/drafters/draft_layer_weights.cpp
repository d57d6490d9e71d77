#include "models/drafters/draft_layer_weights.h"

#include "models/common/recording_binder.h"
#include "models/common/synthetic_weights.h"

namespace md {

void bind_draft_layer(RecordingBinder& bind, const std::string& p, const DraftLayerShape& s,
                      DraftLayerWeights& w) {
  const int64_t h = s.hidden;
  w.input_layernorm = bind.bf16(p + "input_layernorm.weight", {h});
  w.post_attention_layernorm = bind.bf16(p + "post_attention_layernorm.weight", {h});
  w.q_proj = bind.matrix(p + "self_attn.q_proj.weight", s.q_dim, h);
  w.k_proj = bind.matrix(p + "self_attn.k_proj.weight", s.kv_dim, h);
  w.v_proj = bind.matrix(p + "self_attn.v_proj.weight", s.kv_dim, h);
  w.o_proj = bind.matrix(p + "self_attn.o_proj.weight", h, s.q_dim);
  w.q_norm = bind.bf16(p + "self_attn.q_norm.weight", {s.head_dim});
  w.k_norm = bind.bf16(p + "self_attn.k_norm.weight", {s.head_dim});
  w.gate_proj = bind.matrix(p + "mlp.gate_proj.weight", s.intermediate, h);
  w.up_proj = bind.matrix(p + "mlp.up_proj.weight", s.intermediate, h);
  w.down_proj = bind.matrix(p + "mlp.down_proj.weight", h, s.intermediate);
}

void make_synthetic_draft_layer(SyntheticWeights& random, const DraftLayerShape& s,
                                DraftLayerWeights& w) {
  const int64_t h = s.hidden;
  // Plain norms multiply: magnitudes about 1 keep activations at scale.
  w.input_layernorm = random.tensor(h, 1.0f);
  w.post_attention_layernorm = random.tensor(h, 1.0f);
  w.q_proj = random.matrix(s.q_dim, h);
  w.k_proj = random.matrix(s.kv_dim, h);
  w.v_proj = random.matrix(s.kv_dim, h);
  w.o_proj = random.matrix(h, s.q_dim);
  w.q_norm = random.tensor(s.head_dim, 1.0f);
  w.k_norm = random.tensor(s.head_dim, 1.0f);
  w.gate_proj = random.matrix(s.intermediate, h);
  w.up_proj = random.matrix(s.intermediate, h);
  w.down_proj = random.matrix(h, s.intermediate);
}

}  // namespace md
