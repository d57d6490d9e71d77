// DFlash2 block drafter for qwen3_5 targets (DFlash2DraftModel) as read and validated from its
// config.json (qwen38-dflash2.md §11.1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/common/config_files.h"
#include "models/common/config_footprint.h"
#include "models/common/draft_target_config.h"

namespace md {

struct DFlash2Config {
  std::string config_path;  // for messages of the target check
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  double rms_norm_eps = 0;
  double rope_theta = 0;
  int64_t sliding_window = 0;
  int64_t vocab_size = 0;
  int64_t num_target_layers = 0;
  // dflash_config
  int64_t block_size = 0;  // 1 anchor + block_size - 1 drafts
  std::vector<int64_t> target_layer_ids;
  int64_t mask_token_id = 0;
  int64_t conv_kernel_size = 0;
  int64_t conv_group_size = 0;
  int64_t selector_rank = 0;
  int64_t selector_top_k = 0;

  int64_t num_taps() const { return static_cast<int64_t>(target_layer_ids.size()); }
  int64_t fc_in_features() const { return num_taps() * hidden_size; }
  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t conv_groups() const { return hidden_size / conv_group_size; }
  // kernel_projection rows: 2 sides x taps x groups.
  int64_t kernel_projection_rows() const { return 2 * conv_kernel_size * conv_groups(); }
};

// Throws md::Error naming the file, field and value on anything §11.1 refuses.
DFlash2Config parse_dflash2_config(const ConfigFiles& files);
// The drafter's hidden size, vocabulary and target layer count must match its target's.
void check_dflash2_target(const DFlash2Config& draft, const DraftTarget& target);

// Per-"token" reads are per draft round (one block); the target's embedding and lm_head that the
// drafter borrows are not included.
ConfigFootprint dflash2_footprint(const DFlash2Config& config, const FootprintOptions& options);

}  // namespace md
