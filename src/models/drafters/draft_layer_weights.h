// The decoder layer both block drafters are built of (attention with per-head q/k norms, a
// SwiGLU MLP, plain bf16 norms; DFlash2 adds its block convs): the tensors, how a checkpoint
// binds them (the same names in DFlash2's and speculators' layouts), random ones for the
// synthetic benchmark shapes, and what the context store reads of them.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/bf16_matrix.h"
#include "models/drafters/draft_context.h"

namespace md {

class RecordingBinder;
class SyntheticWeights;

struct DraftLayerShape {
  int64_t hidden = 0, q_dim = 0, kv_dim = 0, head_dim = 0, intermediate = 0;
};

// Of any drafter config with these widths (DFlash2Config, DSparkConfig).
template <typename Config>
DraftLayerShape draft_layer_shape(const Config& c) {
  return {c.hidden_size, c.q_dim(), c.kv_dim(), c.head_dim, c.intermediate_size};
}

struct DraftLayerWeights {
  const uint16_t* input_layernorm = nullptr;           // [hidden], plain weight
  const uint16_t* post_attention_layernorm = nullptr;  // [hidden], plain weight
  kernels::Bf16Matrix q_proj, k_proj, v_proj, o_proj;
  const uint16_t* q_norm = nullptr;  // [head_dim], plain weight
  const uint16_t* k_norm = nullptr;  // [head_dim], plain weight
  kernels::Bf16Matrix gate_proj, up_proj, down_proj;
};

// `prefix`: "layers.{l}.".
void bind_draft_layer(RecordingBinder& bind, const std::string& prefix, const DraftLayerShape& s,
                      DraftLayerWeights& w);
void make_synthetic_draft_layer(SyntheticWeights& random, const DraftLayerShape& s,
                                DraftLayerWeights& w);
inline DraftContextLayer context_layer(const DraftLayerWeights& w) {
  return {&w.k_proj, &w.v_proj, w.k_norm};
}

}  // namespace md
