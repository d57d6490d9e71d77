// Test seam of the DFlash2 drafter: deliberate formula changes that exist only so that tests can
// prove their comparisons with the oracles and goldens fail when a formula is wrong (negative
// controls). Production never sets one; DFlash2Options::ablation holds kNone unless a test says
// otherwise. Included by the drafter that honours it and by tests, never by a public header.
#pragma once

namespace md::testing {

enum class DFlash2Ablation : int {
  kNone = 0,       // the drafter as specified (a value-initialised option)
  kCausalBlock,    // block rows attend only to earlier block rows (Z1's causal default)
  kSkipBlockConv,  // attention_conv and mlp_conv pass their input through
};

}  // namespace md::testing
