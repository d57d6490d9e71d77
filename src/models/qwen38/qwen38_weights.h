// The Qwen3.8 (`qwen3_5`) text model's tensors bound by name (spec §2): matrices read in place
// from the memory-mapped checkpoint, in whatever format it holds them; the small vectors (norm
// scales, conv taps, decay factors) as f32 copies in the form the kernels use, which is also the
// form llama.cpp's GGUF stores them in (norm scales 1 + w, −exp(A_log)). Both the multimodal
// naming (`model.language_model.*`) and the flat text-only naming (`model.*`) are accepted;
// `lm_head.weight` is unprefixed in both.
#pragma once

#include <memory>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/moe_routing.h"
#include "kernels/weight_matrix.h"
#include "models/common/weight_binder.h"
#include "models/qwen38/qwen38_config.h"

namespace md {

struct Qwen38GdnWeights {
  kernels::WeightMatrix in_proj_qkv;  // [conv_dim, H]: blocks q | k | v
  kernels::WeightMatrix in_proj_z;    // [value_dim, H]
  kernels::WeightMatrix in_proj_b;    // [value heads, H]
  kernels::WeightMatrix in_proj_a;    // [value heads, H]
  std::vector<float> conv1d;          // [conv_dim][kernel], widened to f32
  std::vector<float> decay_factor;    // [value heads], −exp(A_log)
  std::vector<float> dt_bias;         // [value heads]
  std::vector<float> norm;            // [value head dim], plain scale
  kernels::WeightMatrix out_proj;     // [H, value_dim]
};

struct Qwen38AttentionWeights {
  kernels::WeightMatrix q_proj;  // [heads·2·head_dim, H]: per head, query rows then gate rows
  kernels::WeightMatrix k_proj;  // [kv heads·head_dim, H]
  kernels::WeightMatrix v_proj;
  kernels::WeightMatrix o_proj;  // [H, heads·head_dim]
  std::vector<float> q_norm;     // [head_dim], the scale 1 + w of the zero-centred weight
  std::vector<float> k_norm;
  // attention_bias: the projections' biases (empty without), f32.
  std::vector<float> q_bias, k_bias, v_bias, o_bias;
};

// A Qwen3.5-MoE layer's sparse block (its MLP).
struct Qwen38MoeWeights {
  kernels::WeightMatrix router;              // [experts, H] (mlp.gate)
  kernels::ExpertMatrices experts;           // per expert: gate, up [moe I, H]; down [H, moe I]
  kernels::WeightMatrix shared_gate_proj;    // [shared I, H]
  kernels::WeightMatrix shared_up_proj;      // [shared I, H]
  kernels::WeightMatrix shared_down_proj;    // [H, shared I]
  kernels::WeightMatrix shared_expert_gate;  // [1, H]: σ(x·w) scales the shared expert
};

struct Qwen38LayerWeights {
  std::vector<float> input_layernorm;           // [H], the scale 1 + w (zero-centred weight)
  std::vector<float> post_attention_layernorm;  // [H], the same
  Qwen38GdnWeights gdn;                         // set on linear-attention layers
  Qwen38AttentionWeights attention;             // set on full-attention layers
  kernels::WeightMatrix gate_proj;              // [I, H] (dense models)
  kernels::WeightMatrix up_proj;                // [I, H]
  kernels::WeightMatrix down_proj;              // [H, I]
  Qwen38MoeWeights moe;                         // MoE models
};

struct Qwen38Weights {
  kernels::WeightMatrix embed_tokens;  // [vocab, H]
  std::vector<Qwen38LayerWeights> layers;
  std::vector<float> norm;        // [H], the scale 1 + w (zero-centred weight)
  kernels::WeightMatrix lm_head;  // [vocab, H]
  std::string prefix;  // the naming found: "model.language_model.", "model." or "blk." (GGUF)
  OwnedWeights owned;  // copies of misaligned tensors, if any
  std::shared_ptr<const void> storage;  // the mapped file the matrices point into, when owned here
  std::vector<std::unique_ptr<std::uint8_t[]>> packed;  // q8-input row groups (set_matmul_inputs)
  // A tensor-parallel rank's gathered rows and columns (qwen38_tensor_shard.h).
  std::vector<std::unique_ptr<std::uint8_t[]>> sliced;
  std::shared_ptr<const void> slice_storage;  // the rank's pack, when read from one
};

// n bf16 values as f32 (exact).
std::vector<float> widened(const uint16_t* bf16, int64_t n);
// A zero-centred RMSNorm weight w (bf16) as the scale it applies, 1 + w in f32 as transformers
// forms it: one plain-scale norm then serves this checkpoint and a GGUF that stores 1 + w.
std::vector<float> zero_centred_scale(const uint16_t* w, int64_t n);

// Throws md::Error naming the tensor on a missing tensor, a wrong shape or a wrong dtype.
Qwen38Weights bind_qwen38_weights(const Qwen38Config& config, const Checkpoint& checkpoint);

// Tags every matrix with the model's input mode (kernels/bf16_matrix.h): bf16 matrices heed kBf16;
// GGUF Q4_0 / Q4_1 / Q8_0 heed kQ8 and are then packed for it into `packed`.
void set_matmul_inputs(Qwen38Weights& weights, kernels::MatmulInputs inputs);

// Calls fn(matrix) for every matrix a step may multiply: lm_head and each layer's projections
// (the layer kind a layer is not, and the MLP kind a model is not, have empty ones, rows 0),
// every routed expert's included. Weights may be const.
template <typename Weights, typename Fn>
void for_each_multiplied_matrix(Weights& weights, Fn fn) {
  fn(weights.lm_head);
  for (auto& l : weights.layers) {
    for (auto* m :
         {&l.gdn.in_proj_qkv, &l.gdn.in_proj_z, &l.gdn.in_proj_b, &l.gdn.in_proj_a, &l.gdn.out_proj,
          &l.attention.q_proj, &l.attention.k_proj, &l.attention.v_proj, &l.attention.o_proj,
          &l.gate_proj, &l.up_proj, &l.down_proj, &l.moe.router, &l.moe.shared_gate_proj,
          &l.moe.shared_up_proj, &l.moe.shared_down_proj, &l.moe.shared_expert_gate}) {
      fn(*m);
    }
    for (auto* list : {&l.moe.experts.gate, &l.moe.experts.up, &l.moe.experts.down}) {
      for (auto& m : *list) fn(m);
    }
  }
}

// Bytes of the routed experts (all of them), and of those one row reads: top-k experts per layer,
// counted at the layer's mean expert size.
std::size_t routed_expert_bytes(const Qwen38Weights& weights);
std::size_t routed_expert_bytes_per_row(const Qwen38Weights& weights, int64_t experts_per_token);
// The routed-expert bytes of a step that ran experts_run[i] distinct experts in the i-th MoE layer.
std::size_t routed_expert_bytes_run(const Qwen38Weights& weights,
                                    const std::vector<int64_t>& experts_run);

// Whether any multiplied matrix is a GGUF type the q8 inputs apply to.
bool has_q8_matrices(const Qwen38Weights& weights);

}  // namespace md
