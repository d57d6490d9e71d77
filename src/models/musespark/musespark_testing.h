// Test seam of the Muse Spark family: deliberate formula changes that exist only so that tests can
// prove their golden comparisons fail when a formula is wrong (negative controls). Production never
// sets one; MuseSparkOptions::ablation holds kNone unless a test says otherwise.
#pragma once

#include <cstdint>
#include <vector>

namespace md::testing {

enum class MuseAblation : int {
  kNone = 0,          // the model as specified (a value-initialised option)
  kRopeOnNopeLayers,  // full-attention layers rotate q and k as the sliding ones do
  kNoGateClamp,       // residual gates: α = sqrt(sigmoid(−u)(1 + β)) without the 1e-3 floor
  kNoTailMask,        // logits of the untrained ids (>= vocab_used) left as computed
  kWindowOneLonger,   // sliding layers attend to window + 1 keys (a `k > q − window` mask)
};

// What a forward records for a test when MuseSparkOptions::probe points here.
struct MuseProbe {
  // Every routing decision: per layer, per row, the chosen experts in selection order, so that a
  // comparison can tell routing flips from formula errors.
  std::vector<int32_t> routes;
};

}  // namespace md::testing
