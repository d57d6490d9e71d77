// The final logits of a model with a softcap and an untrained vocabulary tail (Muse Spark §4.6):
// logit ← cap · tanh(logit · multiplier / cap) for ids below `valid`, −∞ from `valid` on. One
// function for the reference forwards and the programs' lm_head tiles (which then take their
// argmax over what it leaves), so that both round alike.
#pragma once

#include <cstdint>

namespace md::kernels {

// Ids [begin, end) of one row of logits (indexed by id).
void softcap_logits(float* logits, int64_t begin, int64_t end, int64_t valid, float multiplier,
                    float cap);

}  // namespace md::kernels
