// Kimi K3 text model (`kimi_k3` / `kimi_linear`: KDA + MLA without RoPE, attention residuals,
// latent MoE with MXFP4 routed experts) as read and validated from config.json (kimi-k3-dspark.md
// §2).
#pragma once

#include <cstdint>
#include <vector>

#include "models/common/config_files.h"
#include "models/common/config_footprint.h"
#include "models/common/draft_target_config.h"
#include "models/common/quantization_config.h"

namespace md {

enum class KimiLayerKind : uint8_t { kKda, kMla };

struct KimiK3Config {
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t vocab_size = 0;
  double rms_norm_eps = 0;
  int64_t attn_res_block_size = 0;
  int64_t max_position_embeddings = 0;

  // MLA (no rotary: qk_rope_head_dim is the width of a shared, unrotated key part).
  int64_t num_attention_heads = 0;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  // KDA (linear_attn_config).
  int64_t kda_num_heads = 0;
  int64_t kda_head_dim = 0;
  int64_t short_conv_kernel = 0;
  double gate_lower_bound = 0;
  std::vector<KimiLayerKind> layer_types;  // from full_attn_layers / kda_layers

  // FFN: dense layers first, then latent MoE.
  int64_t intermediate_size = 0;  // dense MLP
  int64_t first_k_dense_replace = 0;
  int64_t num_experts = 0;
  int64_t num_experts_per_token = 0;
  int64_t moe_intermediate_size = 0;
  int64_t num_shared_experts = 0;
  int64_t routed_expert_hidden_size = 0;  // latent width
  double situ_beta = 0;
  double situ_linear_beta = 0;

  QuantizationConfig quantization;  // MXFP4 routed experts
  std::vector<int64_t> eos_token_ids;

  int64_t kda_channels() const { return kda_num_heads * kda_head_dim; }
  int64_t mla_qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // Per token and MLA layer, absorbed decode caches the normed latent and the shared key part.
  int64_t mla_latent_cache_width() const { return kv_lora_rank + qk_rope_head_dim; }
  // Non-absorbed decode caches K (nope + shared) and V per head.
  int64_t mla_kv_cache_width() const {
    return num_attention_heads * (mla_qk_head_dim() + v_head_dim);
  }
  int64_t shared_intermediate_size() const { return num_shared_experts * moe_intermediate_size; }
  // Stored attention-residual blocks: ceil(L / B).
  int64_t num_residual_blocks() const {
    return (num_layers + attn_res_block_size - 1) / attn_res_block_size;
  }

  KimiLayerKind layer_kind(int64_t layer) const;
  bool is_moe_layer(int64_t layer) const { return layer >= first_k_dense_replace; }
  int64_t num_kda_layers() const;
  int64_t num_mla_layers() const { return num_layers - num_kda_layers(); }
  int64_t num_moe_layers() const { return num_layers - first_k_dense_replace; }
  // State slot of a KDA / MLA layer: its rank among layers of its kind.
  int64_t kda_slot(int64_t layer) const;
  int64_t mla_slot(int64_t layer) const;

  DraftTarget draft_target() const;
};

// Throws md::Error naming the file, field and value on anything §2 refuses. Accepts any sizes,
// so the scaled-down test model (§15) loads.
KimiK3Config parse_kimi_k3_config(const ConfigFiles& files);

ConfigFootprint kimi_k3_footprint(const KimiK3Config& config, const FootprintOptions& options);

}  // namespace md
