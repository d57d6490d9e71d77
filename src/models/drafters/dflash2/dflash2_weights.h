// The DFlash2 drafter's tensors (qwen38-dflash2.md §11.2) bound in place from its bf16
// model.safetensors, every shape checked against the config.
#pragma once

#include <cstdint>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/bf16_matrix.h"
#include "models/common/weight_binder.h"
#include "models/drafters/dflash2_config.h"
#include "models/drafters/draft_context.h"
#include "models/drafters/draft_layer_weights.h"

namespace md {

// One dynamic grouped block conv (attention_conv or mlp_conv, §11.4).
struct DFlash2ConvWeights {
  const uint16_t* base_kernel = nullptr;  // [2 sides][conv_kernel_size taps][hidden]
  kernels::Bf16Matrix kernel_projection;  // [2 · taps · groups, hidden]
};

// The shared drafter layer (draft_layer_weights.h) and its two block convs.
struct DFlash2LayerWeights : DraftLayerWeights {
  DFlash2ConvWeights attention_conv;
  DFlash2ConvWeights mlp_conv;
};

struct DFlash2SelectorWeights {
  kernels::Bf16Matrix hidden_projection;     // [rank, hidden]
  kernels::Bf16Matrix predecessor_codebook;  // [vocab, rank]
  kernels::Bf16Matrix successor_codebook;    // [vocab, rank]
};

struct DFlash2Weights {
  kernels::Bf16Matrix fc;                 // [hidden, taps · hidden]
  const uint16_t* hidden_norm = nullptr;  // [hidden]
  const uint16_t* norm = nullptr;         // [hidden], the final norm
  DFlash2SelectorWeights selector;
  std::vector<DFlash2LayerWeights> layers;
  OwnedWeights owned;  // copies of tensors that were misaligned in the file
};

// Throws md::Error naming the tensor and file when one is missing, not bf16 or of another shape.
DFlash2Weights bind_dflash2_weights(const DFlash2Config& config, const Checkpoint& checkpoint);

// The context store's view of the weights (draft_context.h): fc, hidden_norm, k/v and k_norm.
DraftContextSpec dflash2_context_spec(const DFlash2Config& config, const DFlash2Weights& weights);

// Tags every matrix with the bf16-input mode (kernels/bf16_matrix.h), the target's.
void set_matmul_inputs(DFlash2Weights& weights, kernels::MatmulInputs inputs);

}  // namespace md
