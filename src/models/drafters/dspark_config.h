// DSpark block drafter in the speculators layout (RedHat Kimi-K3 speculator; also the Muse-Spark
// drafter) as read and validated from its config.json (kimi-k3-dspark.md §13.1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/common/config_files.h"
#include "models/common/config_footprint.h"
#include "models/common/draft_target_config.h"

namespace md {

struct DSparkConfig {
  std::string config_path;  // for messages of the target check
  // transformer_layer_config
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;  // the target's (embed_tokens and markov_w1 rows, token ids)
  int64_t sliding_window = 0;
  double rope_theta = 0;
  double rms_norm_eps = 0;
  // top level
  std::vector<int64_t> aux_hidden_state_layer_ids;  // target layers entered, speculators convention
  int64_t mask_token_id = 0;
  // The draft vocabulary (lm_head and markov_w2 rows): vocab_size, or fewer with a d2t mapping
  // of each draft id to a target id (speculators' reduced vocabulary).
  int64_t draft_vocab_size = 0;
  int64_t markov_rank = 0;
  int64_t block_size = 0;
  bool enable_confidence_head = false;
  bool confidence_head_with_markov = false;

  int64_t num_taps() const { return static_cast<int64_t>(aux_hidden_state_layer_ids.size()); }
  int64_t fc_in_features() const { return num_taps() * hidden_size; }
  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t gqa_group() const { return num_attention_heads / num_key_value_heads; }
};

// Throws md::Error naming the file, field and value on anything §13.1 refuses.
DSparkConfig parse_dspark_config(const ConfigFiles& files);
// Hidden size and vocabulary must match the target; tap ids must lie in 2..L-1.
void check_dspark_target(const DSparkConfig& draft, const DraftTarget& target);

// Per-"token" reads are per draft round (one block through the drafter and its Markov head).
ConfigFootprint dspark_footprint(const DSparkConfig& config, const FootprintOptions& options);

}  // namespace md
