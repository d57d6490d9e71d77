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
};

}  // namespace md::testing
