// Llama-architecture decoder (LlamaForCausalLM, e.g. SmolLM2), the small default model, as read
// and validated from config.json.
#pragma once

#include <cstdint>
#include <vector>

#include "models/common/config_files.h"
#include "models/common/config_footprint.h"

namespace md {

struct LlamaConfig {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double rope_theta = 0;
  double rms_norm_eps = 0;
  int64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  WeightFormat weight_format = WeightFormat::kBF16;  // from torch_dtype / dtype
  std::vector<int64_t> eos_token_ids;

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t gqa_group() const { return num_attention_heads / num_key_value_heads; }
};

// Throws md::Error naming the file, field and value for settings the engine does not implement
// (biases, RoPE scaling, other activations, quantized configs).
LlamaConfig parse_llama_config(const ConfigFiles& files);

ConfigFootprint llama_footprint(const LlamaConfig& config, const FootprintOptions& options);

}  // namespace md
