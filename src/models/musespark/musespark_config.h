// Muse Spark Open text model (sliding-window + NoPE full attention, gated residuals, latent MoE
// with NVFP4 or bf16 experts) as read and validated from config.json (muse-spark-nvfp4.md §1).
#pragma once

#include <cstdint>
#include <vector>

#include "models/common/config_files.h"
#include "models/common/config_footprint.h"
#include "models/common/draft_target_config.h"
#include "models/common/quantization_config.h"

namespace md {

enum class MuseLayerKind : uint8_t { kSlidingAttention, kFullAttention };

// The most verify rows one step takes (a draft block and the target's own token); a sliding
// layer's ring keeps this many slots beyond its window for them (musespark_state.h).
inline constexpr int64_t kMuseVerifyRows = 8;

struct MuseSparkConfig {
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t vocab_size = 0;
  int64_t vocab_used = 0;  // trained ids; logits of ids >= vocab_used are masked
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t sliding_window = 0;  // keys per query, the query included
  double rope_theta = 0;
  std::vector<MuseLayerKind> layer_types;
  std::vector<double> layer_rope_theta;  // 0 on NoPE (full) layers
  int64_t moe_hidden_size = 0;           // latent width Hm
  int64_t moe_intermediate_size = 0;     // expert width I
  int64_t num_experts = 0;
  int64_t num_experts_per_token = 0;
  double rms_norm_eps = 0;
  double post_norm_eps = 0;
  double residual_gate_temperature = 0;
  double qk_scale_factor = 0;
  double output_multiplier = 0;
  double final_logit_softcapping = 0;
  int64_t max_position_embeddings = 0;  // 0: the config states no limit
  QuantizationConfig quantization;      // NVFP4 experts, or none (bf16)
  // Expected expert format per layer. The vendor NVFP4 checkpoint leaves the first and last
  // layers' experts in bf16; the weight loader decides per layer from the tensors present.
  std::vector<WeightFormat> expert_formats;
  std::vector<int64_t> eos_token_ids;

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t gqa_group() const { return num_attention_heads / num_key_value_heads; }
  double softmax_scale() const;
  MuseLayerKind layer_kind(int64_t layer) const;
  bool is_full_attention(int64_t layer) const {
    return layer_kind(layer) == MuseLayerKind::kFullAttention;
  }
  bool uses_rope(int64_t layer) const { return !is_full_attention(layer); }
  int64_t num_full_attention_layers() const;
  int64_t num_sliding_layers() const { return num_layers - num_full_attention_layers(); }

  DraftTarget draft_target() const;
};

// Throws md::Error naming the file, field and value on anything §1 refuses.
MuseSparkConfig parse_musespark_config(const ConfigFiles& files);

ConfigFootprint musespark_footprint(const MuseSparkConfig& config, const FootprintOptions& options);

}  // namespace md
