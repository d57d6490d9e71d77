// Test seam of the Qwen3.8 family: deliberate formula changes that exist only so that tests can
// prove their golden comparisons fail when a formula is wrong (negative controls). Production
// never sets one; Qwen38Options::ablation holds kNone unless a test says otherwise. Included by
// the layers that honour it and by tests, never by a public header.
#pragma once

namespace md::testing {

enum class Qwen38Ablation : int {
  kNone = 0,           // the model as specified (a value-initialised option)
  kSkipConv,           // GDN: feed the projections to the delta rule without the short conv
  kSkipAttentionGate,  // attention: drop the sigmoid output gate
  kTiledKeyHeads,  // GDN: value heads pair with key heads in the other order (tiled ↔ grouped)
  kMoeUnnormalisedWeights,  // MoE: the chosen experts weighted by their softmax probabilities
  kMoeUngatedSharedExpert,  // MoE: the shared expert added without its sigmoid gate
  kSiluWhateverHiddenAct,   // MLP and conv: SiLU whatever hidden_act the config names
  kSkipAttentionBias,       // attention: the projections without their biases
};

}  // namespace md::testing

#include "kernels/activations.h"

namespace md::testing {

// The activation the reference forward applies: the config's, unless the ablation replaces it.
inline kernels::Activation reference_activation(kernels::Activation configured,
                                                Qwen38Ablation ablation) {
  return ablation == Qwen38Ablation::kSiluWhateverHiddenAct ? kernels::Activation::kSilu
                                                            : configured;
}

}  // namespace md::testing
