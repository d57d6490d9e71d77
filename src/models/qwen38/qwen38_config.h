// Qwen3.8-27B-style hybrid model (`qwen3_5`: Gated DeltaNet + gated GQA attention in any layer
// order, 3:1 in the released models) as read and validated from config.json (spec
// qwen38-dflash2.md §1, widened to every dense config transformers' qwen3_5 runs), and its
// mixture-of-experts sibling `qwen3_5_moe` (the same layers with a sparse MoE block as MLP).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/activations.h"
#include "models/common/config_files.h"
#include "models/common/config_footprint.h"
#include "models/common/draft_target_config.h"

namespace md {

enum class Qwen38LayerKind : uint8_t { kLinearAttention, kFullAttention };

// Qwen3.5-MoE (`qwen3_5_moe`): every layer's MLP is a sparse block of routed experts (softmax
// top-k, renormalised) plus one shared expert scaled by a sigmoid gate. experts == 0: dense.
struct Qwen38Moe {
  int64_t experts = 0;
  int64_t experts_per_token = 0;
  int64_t intermediate = 0;         // moe_intermediate_size, per routed expert
  int64_t shared_intermediate = 0;  // shared_expert_intermediate_size
};

struct Qwen38Config {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t linear_num_key_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel = 0;
  double partial_rotary_factor = 0.25;
  double rope_theta = 0;
  double rms_norm_eps = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;  // lm_head reads embed_tokens (the 0.8B–9B siblings)
  bool attention_bias = false;       // q/k/v/o projections with biases (no released model)
  // The checkpoint's value-head order when value heads outnumber key heads: transformers groups
  // them (value head j pairs with key head j / group); llama.cpp's GGUF converter reorders every
  // value-head tensor so that they tile (j pairs with key head j mod key heads).
  bool value_heads_tiled = false;
  std::vector<Qwen38LayerKind> layer_types;
  Qwen38Moe moe;
  // The MLP's and the short conv's activation (transformers applies hidden_act to both).
  kernels::Activation hidden_act = kernels::Activation::kSilu;
  std::vector<int64_t> eos_token_ids;  // stop ids: generation_config.json ∪ config.json

  bool is_moe() const { return moe.experts > 0; }
  // The model_type of the text model: "qwen3_5_text" or "qwen3_5_moe_text".
  const char* text_model_type() const;

  // Gated DeltaNet widths.
  int64_t key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // Value heads per key head.
  int64_t linear_head_group() const { return linear_num_value_heads / linear_num_key_heads; }
  // Attention widths: q_proj carries a query and a gate per head.
  int64_t q_proj_dim() const { return num_attention_heads * 2 * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t attn_output_dim() const { return num_attention_heads * head_dim; }
  int64_t gqa_group() const { return num_attention_heads / num_key_value_heads; }
  int64_t rotary_dim() const;

  Qwen38LayerKind layer_kind(int64_t layer) const;
  bool is_full_attention(int64_t layer) const;
  int64_t num_full_attention_layers() const;
  int64_t num_linear_attention_layers() const { return num_layers - num_full_attention_layers(); }
  // Index of a GDN layer among GDN layers / of an attention layer among attention layers (the
  // slot of its state).
  int64_t linear_attention_ordinal(int64_t layer) const;
  int64_t full_attention_ordinal(int64_t layer) const;
  // How many layers before `layer` are of `kind`.
  int64_t layers_before(int64_t layer, Qwen38LayerKind kind) const;

  DraftTarget draft_target() const;
};

// Throws md::Error naming the file, field and value on anything §1.3 refuses.
Qwen38Config parse_qwen38_config(const ConfigFiles& files);

ConfigFootprint qwen38_footprint(const Qwen38Config& config, const FootprintOptions& options);

}  // namespace md
