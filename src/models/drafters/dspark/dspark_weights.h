// The DSpark drafter's tensors (kimi-k3-dspark.md §13.2) bound in place from its bf16
// model.safetensors, every shape checked against the config, every tensor accounted for.
// speculators saves no embed_tokens (a drafter embeds with its target's table) and no lm_head
// when the draft vocabulary is the target's (the target's head): the target's are used then.
#pragma once

#include <cstdint>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/bf16_matrix.h"
#include "kernels/weight_matrix.h"
#include "models/common/weight_binder.h"
#include "models/drafters/draft_context.h"
#include "models/drafters/draft_layer_weights.h"
#include "models/drafters/dspark_config.h"
#include "models/drafters/speculative_drafter.h"

namespace md {

// A DSpark layer is exactly the shared drafter layer (§13.2).
using DSparkLayerWeights = DraftLayerWeights;

struct DSparkWeights {
  kernels::WeightMatrix embed_tokens;  // [vocab, hidden]: the drafter's own, else the target's
  kernels::WeightMatrix lm_head;       // [draft vocab, hidden]: the same
  // Draft id → target id (d + d2t[d], speculators' offsets); empty when the vocabularies agree.
  std::vector<int32_t> draft_to_target;
  kernels::Bf16Matrix fc;                 // [hidden, taps · hidden]
  const uint16_t* hidden_norm = nullptr;  // [hidden]
  const uint16_t* norm = nullptr;         // [hidden], the final norm
  // §13.6: row `prev` of markov_w1 is the previous token's code, markov_w2 maps it to a bias.
  kernels::Bf16Matrix markov_w1;  // [vocab, rank], row = a target token
  kernels::Bf16Matrix markov_w2;  // [draft vocab, rank]
  // §13.7, when the config enables it: [1, hidden (+ rank)] and its bias.
  kernels::Bf16Matrix confidence;
  std::vector<float> confidence_bias;
  std::vector<DSparkLayerWeights> layers;
  OwnedWeights owned;  // copies of tensors that were misaligned in the file
};

// Throws md::Error naming the tensor and file when one is missing, not bf16, of another shape,
// or not accounted for by the config, and when a d2t mapping is not one-to-one into the target's
// vocabulary. `target` lends embed_tokens and lm_head where the checkpoint has none.
DSparkWeights bind_dspark_weights(const DSparkConfig& config, const Checkpoint& checkpoint,
                                  const TargetView& target);

// The context store's view of the weights (draft_context.h): fc, hidden_norm, k/v and k_norm.
DraftContextSpec dspark_context_spec(const DSparkConfig& config, const DSparkWeights& weights);

}  // namespace md
