// The Qwen3.8 (`qwen3_5`) text model's tensors bound by name (spec §2), read in place from the
// memory-mapped checkpoint. Both the multimodal naming (`model.language_model.*`) and the flat
// text-only naming (`model.*`) are accepted; `lm_head.weight` is unprefixed in both.
#pragma once

#include <vector>

#include "io/checkpoint.h"
#include "kernels/weight_matrix.h"
#include "models/common/weight_binder.h"
#include "models/qwen38/qwen38_config.h"

namespace md {

struct Qwen38GdnWeights {
  kernels::WeightMatrix in_proj_qkv;  // [conv_dim, H]: blocks q | k | v
  kernels::WeightMatrix in_proj_z;    // [value_dim, H]
  kernels::WeightMatrix in_proj_b;    // [value heads, H]
  kernels::WeightMatrix in_proj_a;    // [value heads, H]
  const uint16_t* conv1d = nullptr;   // [conv_dim, 1, kernel]
  std::vector<float> a_log;           // [value heads]
  std::vector<float> dt_bias;         // [value heads]
  const uint16_t* norm = nullptr;     // [value head dim], plain scale
  kernels::WeightMatrix out_proj;     // [H, value_dim]
};

struct Qwen38AttentionWeights {
  kernels::WeightMatrix q_proj;  // [heads·2·head_dim, H]: per head, query rows then gate rows
  kernels::WeightMatrix k_proj;  // [kv heads·head_dim, H]
  kernels::WeightMatrix v_proj;
  kernels::WeightMatrix o_proj;      // [H, heads·head_dim]
  const uint16_t* q_norm = nullptr;  // [head_dim], zero-centred
  const uint16_t* k_norm = nullptr;
};

struct Qwen38LayerWeights {
  const uint16_t* input_layernorm = nullptr;           // [H], zero-centred
  const uint16_t* post_attention_layernorm = nullptr;  // [H], zero-centred
  Qwen38GdnWeights gdn;                                // set on linear-attention layers
  Qwen38AttentionWeights attention;                    // set on full-attention layers
  kernels::WeightMatrix gate_proj;                     // [I, H]
  kernels::WeightMatrix up_proj;                       // [I, H]
  kernels::WeightMatrix down_proj;                     // [H, I]
};

struct Qwen38Weights {
  kernels::WeightMatrix embed_tokens;  // [vocab, H]
  std::vector<Qwen38LayerWeights> layers;
  const uint16_t* norm = nullptr;  // [H], zero-centred
  kernels::WeightMatrix lm_head;   // [vocab, H]
  std::string prefix;              // the naming found: "model.language_model." or "model."
  OwnedWeights owned;              // copies of misaligned tensors, if any
};

// Throws md::Error naming the tensor on a missing tensor, a wrong shape or a wrong dtype.
Qwen38Weights bind_qwen38_weights(const Qwen38Config& config, const Checkpoint& checkpoint);

// Tags every matrix with the model's bf16-input mode (kernels/bf16_matrix.h).
void set_matmul_inputs(Qwen38Weights& weights, kernels::MatmulInputs inputs);

}  // namespace md
