// The DSpark drafter's tensors (kimi-k3-dspark.md §13.2) bound in place from its bf16
// model.safetensors, every shape checked against the config, every tensor accounted for.
#pragma once

#include <cstdint>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/bf16_matrix.h"
#include "models/common/weight_binder.h"
#include "models/drafters/draft_context.h"
#include "models/drafters/draft_layer_weights.h"
#include "models/drafters/dspark_config.h"

namespace md {

// A DSpark layer is exactly the shared drafter layer (§13.2).
using DSparkLayerWeights = DraftLayerWeights;

struct DSparkWeights {
  kernels::Bf16Matrix embed_tokens, lm_head;  // the drafter's own [vocab, hidden]
  kernels::Bf16Matrix fc;                     // [hidden, taps · hidden]
  const uint16_t* hidden_norm = nullptr;      // [hidden]
  const uint16_t* norm = nullptr;             // [hidden], the final norm
  // §13.6: row `prev` of markov_w1 is the previous token's code, markov_w2 maps it to a bias.
  kernels::Bf16Matrix markov_w1, markov_w2;  // [vocab, rank] each
  // §13.7, when the config enables it: [1, hidden + rank] and its bias (not used yet).
  kernels::Bf16Matrix confidence;
  std::vector<float> confidence_bias;
  std::vector<DSparkLayerWeights> layers;
  OwnedWeights owned;  // copies of tensors that were misaligned in the file
};

// Throws md::Error naming the tensor and file when one is missing, not bf16, of another shape,
// or not accounted for by the config.
DSparkWeights bind_dspark_weights(const DSparkConfig& config, const Checkpoint& checkpoint);

// The context store's view of the weights (draft_context.h): fc, hidden_norm, k/v and k_norm.
DraftContextSpec dspark_context_spec(const DSparkConfig& config, const DSparkWeights& weights);

}  // namespace md
